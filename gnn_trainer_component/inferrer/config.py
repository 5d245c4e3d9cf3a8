"""GraphInferrer's ``inference_config``: one frozen dataclass, validated in one place.

Keys (all optional)::

  {"signatures": ["embeddings"],   # export signatures to run; their outputs become columns
   "batch_size": 512,              # nodes per model call
   "sampling_seed": 0,             # the neighbourhoods sampled around each node (in memory)
   "engine": "in_memory",          # or "beam": GraphSampler's Beam sampling, for any size
   "as_of": null,                  # time-aware sampling: every node as of this time
   "mode": "sampled",              # or "full_graph": the model over the whole graph at once
   "jit_compile": null,            # mode "full_graph": XLA where it compiles (true: required)
   "chunk_edges": 2000000}         # mode "full_graph": more edges -> layer by layer in chunks

``mode: "full"``, the old spelling of ``"full_graph"``, still works (with a
deprecation warning). TFX-free, so pipeline definitions and tests check it
without a pipeline.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

from absl import logging

from gnn_trainer_component import config_dicts
from gnn_trainer_component import errors

#: ``engine`` values: the graph held in memory, or sampled by TF-GNN's Beam sampler.
IN_MEMORY, BEAM = "in_memory", "beam"
ENGINES = (IN_MEMORY, BEAM)
#: ``mode`` values: a sampled subgraph around each node, or the whole graph at once (the word
#: of GnnTrainer's ``graph_mode``).
SAMPLED, FULL_GRAPH = "sampled", "full_graph"
MODES = (SAMPLED, FULL_GRAPH)
#: Deprecated ``mode`` spellings -> the mode each stands for.
DEPRECATED_MODES = {"full": FULL_GRAPH}

#: The signatures a GnnTrainer export has (see trainer/export.py and embeddings.py).
KNOWN_SIGNATURES = ("embeddings", "serving_default")


class InferenceConfigError(errors.GnnError, ValueError):
  """``inference_config`` has an unknown key or a bad value."""


@dataclasses.dataclass(frozen=True)
class InferenceConfig:
  """What GraphInferrer runs, besides its artifacts.

  Attributes:
    signatures: Export signatures run on each node's subgraph; every output
      becomes a column (names must not collide).
    batch_size: Nodes per model call.
    sampling_seed: Seeds the neighbourhood sampled around each node by the
      in-memory engine: the same seed, batch size and graph give the same table.
    engine: ``"in_memory"`` (the graph loaded into this process) or ``"beam"``
      (TF-GNN's Beam sampler, as GraphSampler; graphs beyond one machine).
    as_of: With time-aware sampling (``uniform_before``, ``latest``): every
      node's subgraph holds only the edges before this time, as a seed at
      this time does in training (required then; refused otherwise).
    mode: ``"sampled"`` (a subgraph sampled around each node, as served) or
      ``"full_graph"`` (the model over the whole graph held in memory at once:
      each node's state from its whole neighbourhood; in memory only, for
      models whose export has whole-graph functions).
    jit_compile: Mode ``"full_graph"`` only: compile the whole-graph pass with XLA,
      which fuses the per-edge steps of each layer instead of holding each
      one's ``[edges, units]`` tensor (less memory at its peak; the same
      values to float rounding). ``None``: XLA where the model's ops compile,
      else the pass runs without it (logged); ``True``: XLA or an error;
      ``False``: never.
    chunk_edges: Mode ``"full_graph"`` only: a graph with more edges runs layer
      by layer, each layer over chunks of nodes with at most this many incident
      edges (memory bounded by a chunk, not the graph), where the model allows
      it (docs/inference.md); a graph with fewer runs in one pass.
  """
  signatures: tuple[str, ...] = ("embeddings",)
  batch_size: int = 512
  sampling_seed: int = 0
  engine: str = IN_MEMORY
  as_of: Optional[float] = None
  mode: str = SAMPLED
  jit_compile: Optional[bool] = None
  chunk_edges: int = 2_000_000


def _fail(key: str, value: Any, expected: str) -> InferenceConfigError:
  return InferenceConfigError(
      f"GraphInferrer inference_config[{key!r}] = {value!r}: expected {expected}. "
      f"Defaults: {json.dumps(dataclasses.asdict(InferenceConfig()))}.")


def _mode(mode: Any) -> str:
  """``mode``, checked; a deprecated spelling is replaced, with a warning."""
  if isinstance(mode, str) and mode in DEPRECATED_MODES:
    logging.warning("GraphInferrer inference_config['mode'] = %r is deprecated: write %r "
                    "(GnnTrainer's graph_mode word for the whole graph); running as %r.",
                    mode, DEPRECATED_MODES[mode], DEPRECATED_MODES[mode])
    return DEPRECATED_MODES[mode]
  if mode not in MODES:
    raise _fail("mode", mode, f"one of {list(MODES)}")
  return mode


def parse(value: Optional[Any]) -> InferenceConfig:
  """An :class:`InferenceConfig` from a dict, its JSON, or None (the defaults).

  Raises:
    InferenceConfigError: naming the key and what it must be.
  """
  if value is None or value == "":
    return InferenceConfig()
  what = "GraphInferrer inference_config"
  value = config_dicts.decode(value, what, InferenceConfigError)
  config_dicts.check_keys(value, (f.name for f in dataclasses.fields(InferenceConfig)), what,
                          InferenceConfigError)
  out = {}
  if "signatures" in value:
    signatures = value["signatures"]
    if (isinstance(signatures, str) or not isinstance(signatures, (list, tuple)) or not signatures
        or not all(isinstance(s, str) and s for s in signatures)
        or len(set(signatures)) != len(signatures)):
      raise _fail("signatures", signatures, f"a non-empty list of distinct names, e.g. "
                  f"{list(KNOWN_SIGNATURES)}")
    out["signatures"] = tuple(signatures)
  for key, low in (("batch_size", 1), ("sampling_seed", 0), ("chunk_edges", 1)):
    if key in value:
      out[key] = config_dicts.int_at_least(value, key, low, _fail)
  if "engine" in value:
    if value["engine"] not in ENGINES:
      raise _fail("engine", value["engine"], f"one of {list(ENGINES)}")
    out["engine"] = value["engine"]
  if value.get("as_of") is not None:
    as_of = value["as_of"]
    if isinstance(as_of, bool) or not isinstance(as_of, (int, float)) or as_of != as_of or (
        abs(as_of) == float("inf")):
      raise _fail("as_of", as_of, "a finite number (the time in the graph's time feature's "
                  "units, e.g. epoch seconds) or null")
    out["as_of"] = as_of
  if "mode" in value:
    out["mode"] = _mode(value["mode"])
  if value.get("jit_compile") is not None:
    if not isinstance(value["jit_compile"], bool):
      raise _fail("jit_compile", value["jit_compile"], "true, false or null")
    out["jit_compile"] = value["jit_compile"]
    if out["jit_compile"] and out.get("mode") != FULL_GRAPH:
      raise _fail("jit_compile", True, 'null or false unless mode is "full_graph" (the '
                  "sampled engine's batches change shape, and XLA would compile each shape "
                  "anew)")
  if out.get("mode") == FULL_GRAPH:
    if out.get("engine") == BEAM:
      raise _fail("engine", BEAM, f'"{IN_MEMORY}" with mode "full_graph" (the whole graph is '
                  'held in memory); for a graph beyond one machine use mode "sampled" on Beam')
    if "as_of" in out:
      raise _fail("as_of", out["as_of"], 'null with mode "full_graph" (it runs on every edge '
                  'of the graph; embed nodes as of a time with mode "sampled")')
  return InferenceConfig(**out)


def dumps(cfg: InferenceConfig) -> str:
  """The JSON ``parse`` reads back."""
  return json.dumps(dict(dataclasses.asdict(cfg), signatures=list(cfg.signatures)),
                    sort_keys=True)
