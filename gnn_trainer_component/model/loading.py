"""Reading a GnnTrainer export: its signatures loaded and checked against a graph.

What GraphInferrer and GraphEvaluator (and any reader of a ``Model``) share:
:func:`load` is the one call that checks the export was trained on the node
set and features of a graph and loads the signatures asked for;
:class:`Signatures` runs a batch of serialized subgraphs through them and maps
their outputs to columns. The export's layout is :mod:`export`'s
(:data:`export.GRAPH_SCHEMA_ASSET_DIR`, :func:`trained_schema`,
:func:`whole_graph_description`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterator, Mapping, Optional

import numpy as np
import tensorflow as tf

from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.model import embeddings as embeddings_lib
from gnn_trainer_component.model import export as export_lib
from gnn_trainer_component.model import whole_graph

#: The column of node ids in a table of outputs; no output may take its name.
ID_COLUMN = "id"
_SOURCE, _TARGET = f"source_{embeddings_lib.EMBEDDING}", f"target_{embeddings_lib.EMBEDDING}"


class InferenceInputError(GraphInputError):
  """The model or the graph cannot give the requested outputs; nothing was published."""


@dataclasses.dataclass(frozen=True)
class Signatures:
  """The export's signatures to run and how their outputs become columns."""
  functions: Mapping[str, Any]  # signature name -> concrete function
  columns: Mapping[tuple[str, str], str]  # (signature, output) -> column ("" = dropped)
  who: str  # the component named in errors
  # A link-prediction model: the end of a pair each node is read as; None: another model.
  as_end: Optional[readout.NodeAsEnd] = None
  saved_model: Any = None  # the loaded export (its whole-graph functions: full.py)

  @property
  def link(self) -> bool:
    """The model reads pairs through link readouts (source/target)."""
    return self.as_end is not None

  def run(self, examples: tf.Tensor, where: str = "") -> dict[str, np.ndarray]:
    """The columns of a batch of serialized subgraphs: ``{column: [batch, ...] array}``.

    Raises:
      InferenceInputError: a signature rejects them (``where`` says whose and which).
    """
    outputs = {}
    for name, function in self.functions.items():
      try:
        got = function(examples=examples)
      except tf.errors.InvalidArgumentError as e:
        raise InferenceInputError(
            f"{self.who}: signature {name!r} {where}rejects the subgraphs: {e.message}\n"
            "The graph must have the node sets and features the model was trained on.") from e
      for key, value in got.items():
        column = self.columns[(name, key)]
        if column:
          outputs[column] = value.numpy()
    return outputs


def load_functions(model_dir: str, names: tuple[str, ...], who: str
                   ) -> tuple[dict[str, Any], Any]:
  """``(the signatures named, the loaded export)`` of the export in ``model_dir``.

  Raises:
    InferenceInputError: no SavedModel in ``model_dir``, or a missing signature
      (naming the ones there are).
  """
  if not tf.saved_model.contains_saved_model(model_dir):
    raise InferenceInputError(
        f"{who}: {model_dir} holds no SavedModel (no saved_model.pb); the model input must be "
        "a GnnTrainer Model, whose export is its Format-Serving folder.")
  loaded = tf.saved_model.load(model_dir)
  missing = [n for n in names if n not in loaded.signatures]
  if missing:
    hint = (" A GnnTrainer export has 'embeddings' unless custom_config export_embeddings "
            "was false; retrain with it on." if embeddings_lib.SIGNATURE in missing else "")
    raise InferenceInputError(
        f"{who}: the model at {model_dir} has no signature {missing} (it has "
        f"{sorted(loaded.signatures)}).{hint}")
  return {n: loaded.signatures[n] for n in names}, loaded


def load_signatures(model_dir: str, names: tuple[str, ...], trained: Optional[Any],
                    schema: Any, node_set: str, who: str) -> Signatures:
  """Loads the export and checks it has ``names`` with distinct outputs.

  Args:
    model_dir: The exported SavedModel.
    names: The signatures to run.
    trained: The graph schema the export keeps (:func:`trained_schema`), if any.
    schema: The graph's schema.
    node_set: The node set inferred (a link model reads its nodes as its end
      of a pair: :func:`readout.node_as_end`).
    who: The component named in errors.

  Raises:
    InferenceInputError: no SavedModel in ``model_dir``, a missing signature
      (naming the ones there are), outputs that collide, ``serving_default``
      of a link-prediction model, or a node set that is neither end of a
      link model's pairs.
  """
  as_end = None
  if trained is not None and readout.READOUT_SOURCE in trained.edge_sets:
    try:
      as_end = readout.node_as_end(trained, schema, node_set, who=who)
    except GraphInputError as e:
      raise InferenceInputError(f"{e} (the model at {model_dir})") from e
  functions, loaded = load_functions(model_dir, names, who)
  outputs = {n: sorted(f.structured_outputs) for n, f in functions.items()}
  if as_end is None and _embeds_both_ends(loaded.signatures):
    as_end = readout.NodeAsEnd()  # a link model exported without its graph schema
  link = as_end is not None
  if link and export_lib.SERVING_SIGNATURE in names:
    raise InferenceInputError(
        f"{who}: the model at {model_dir} scores pairs of nodes (link prediction); "
        "serving_default would score each node with itself. Ask for signatures "
        '["embeddings"] and score pairs from the embeddings.')
  columns, seen = {}, {}
  for name, keys in outputs.items():
    for key in keys:
      column = key
      if link and name == embeddings_lib.SIGNATURE:
        # Keep the node's own end, named embedding; drop the other end's.
        own = f"{as_end.end}_{embeddings_lib.EMBEDDING}"
        column = (key[:-len(own)] + embeddings_lib.EMBEDDING if key.endswith(own) else
                  "" if key.endswith((_SOURCE, _TARGET)) else key)
      if column in (ID_COLUMN,) or (column and column in seen):
        raise InferenceInputError(
            f"{who}: output {key!r} of signature {name!r} and "
            f"{seen.get(column, 'the id column')} would both be column {column!r}; run the "
            "signatures in separate GraphInferrers.")
      if column:
        seen[column] = f"output {key!r} of signature {name!r}"
      columns[(name, key)] = column
  return Signatures(functions, columns, who, as_end, loaded)


def check_pair_model(model_dir: str, schema: Any, who: str, what: str) -> None:
  """Refuses a model that was not trained on pairs, or on other features than ``schema``'s.

  ``what``: the request that needs a model of pairs (named in the error).

  Raises:
    InferenceInputError: naming the model and what it was trained on.
  """
  trained = trained_schema(model_dir)
  if trained is not None and readout.READOUT_SOURCE not in trained.edge_sets:
    raise InferenceInputError(
        f"{who}: the model at {model_dir} was not trained on pairs (its graph schema has no "
        f"{readout.READOUT_SOURCE!r} readout); {what} needs a model of pairs (link_config).")
  check_features(model_dir, trained, schema, who)


def load(model_dir: str, names: tuple[str, ...], schema: Any, node_set: str, who: str
         ) -> Signatures:
  """The export's signatures ``names``, checked against a graph of ``schema`` read at ``node_set``.

  The one call of every reader of a GnnTrainer export: the node set and the
  features the export was trained on (:func:`check_node_set`,
  :func:`check_features`), then :func:`load_signatures`.

  Raises:
    InferenceInputError: as those functions.
  """
  trained = trained_schema(model_dir)
  check_node_set(model_dir, trained, node_set, who)
  check_features(model_dir, trained, schema, who)
  return load_signatures(model_dir, names, trained, schema, node_set, who)


def whole_graph_description(model_dir: str) -> Optional[dict[str, Any]]:
  """What the export says of its whole-graph functions (None: the export predates them)."""
  return whole_graph.read(os.path.join(model_dir, export_lib.GRAPH_SCHEMA_ASSET_DIR))


def trained_schema(model_dir: str) -> Optional[Any]:
  """The graph schema GnnTrainer keeps in the export (None: the export has none)."""
  path = os.path.join(model_dir, export_lib.GRAPH_SCHEMA_ASSET_DIR)
  if not tf.io.gfile.exists(os.path.join(path, graph_schema_lib.GRAPH_SCHEMA_FILE)):
    return None
  return graph_schema_lib.read_artifact_schema(path)


def _embeds_both_ends(functions: Mapping[str, Any]) -> bool:
  """Whether the export's ``embeddings`` signature returns both ends of a pair (link prediction).

  What tells a link model whose export keeps no graph schema (with one, its
  ``_readout/source`` edge set does).
  """
  embeddings = functions.get(embeddings_lib.SIGNATURE)
  return embeddings is not None and any(o.endswith(_SOURCE) for o in embeddings.structured_outputs)


def check_node_set(model_dir: str, trained: Optional[Any], node_set: str,
                   who: str) -> None:
  """Refuses to infer a node set that is not in ``trained``, the model's graph schema.

  Raises:
    InferenceInputError: naming the node set and the ones the model knows.
  """
  if trained is None or node_set in trained.node_sets:
    return
  known = sorted(n for n in trained.node_sets if not n.startswith("_"))
  raise InferenceInputError(
      f"{who}: node set {node_set!r} is not in the graph schema the model at {model_dir} was "
      f"trained on (its node sets: {known}): the model has no state for its nodes. Set the "
      "sampling config's seed node set to one of those, or train a model on this node set.")


def _walk(trained: Any, schema: Any) -> Iterator[tuple[str, str, str, Any, Any]]:
  """One pass over ``trained``'s node and edge sets (readout sets aside) against ``schema``'s.

  Yields ``(kind, set name, feature, trained spec, the graph's spec or None)``:
  with ``feature`` "" for a set (its spec the set's), then, where the graph has
  the set, for each of its features. ``kind``: "nodes" or "edges".
  """
  for kind, pieces, ours in (("nodes", trained.node_sets, schema.node_sets),
                             ("edges", trained.edge_sets, schema.edge_sets)):
    for name, piece in sorted(pieces.items()):
      if name.startswith("_"):  # readout structure: added by samplers, not a table
        continue
      yield kind, name, "", piece, ours.get(name)
      if name in ours:
        for feature, want in sorted(piece.features.items()):
          yield kind, name, feature, want, ours[name].features.get(feature)


def check_features(model_dir: str, trained: Optional[Any], schema: Any,
                   who: str) -> None:
  """Refuses a graph whose features differ in dtype or shape from ``trained``'s.

  ``trained``: the model's graph schema (:func:`trained_schema`; None: nothing to check).

  Features the graph lacks are not refused here (they may be labels, which serving
  does not need); :func:`missing_features` explains a failure they cause.

  Raises:
    InferenceInputError: naming the set, the feature, what the model was trained on and
      what the graph has.
  """
  if trained is None:
    return
  for kind, name, feature, want, got in _walk(trained, schema):
    if not feature or got is None:
      continue
    described = [(tf.dtypes.as_dtype(f.dtype).name, [d.size for d in f.shape.dim])
                 for f in (want, got)]
    if described[0] != described[1]:
      (want_dtype, want_shape), (got_dtype, got_shape) = described
      raise InferenceInputError(
          f"{who}: feature {feature!r} of {kind[:-1]} set {name!r} is {got_dtype} of shape "
          f"{got_shape} in the graph, but the model at {model_dir} was trained on "
          f"{want_dtype} of shape {want_shape}: give the graph the features the model "
          "was trained on.")


def missing_features(model_dir: str, schema: Any) -> str:
  r"""``"The graph lacks ...\n"``: the pieces of the model's graph schema that ``schema`` lacks.

  From the graph schema GnnTrainer keeps in the export (empty if it has none,
  or nothing is missing). Features missing from a graph may be labels, which
  serving does not need: this explains a failure, it does not predict one.
  """
  trained = trained_schema(model_dir)
  if trained is None:
    return ""
  missing = [f"{kind}/{name}.{feature}" if feature else f"{kind}/{name}"
             for kind, name, feature, _, got in _walk(trained, schema) if got is None]
  missing += [f"context/{f}" for f in sorted(trained.context.features)
              if f not in schema.context.features]
  if not missing:
    return ""
  return f"The graph lacks {missing} of the schema the model was trained on. "


