"""The graph errors: bad tables, seeds, sampling or link configs, and graphs too large.

Every engine and component on the graph path raises these (or a subclass of
its own, such as GraphInferrer's ``InferenceInputError``), so the same bad
input gets the same error class everywhere.
"""

from __future__ import annotations

from typing import Any, Iterable

from gnn_trainer_component import errors

#: How many offending ids an error message lists.
MAX_IDS_IN_MESSAGE = 10


class GraphInputError(errors.GnnError, ValueError):
  """The graph tables, seeds, sampling config or link config are invalid."""


class GraphTooLargeError(GraphInputError):
  """The graph's tables would not fit in this machine's memory."""


#: What to do with a graph too large for one machine (the end of a GraphTooLargeError).
PRESAMPLE_HINT = (
    "Pre-sample the subgraphs with GraphSampler on a distributed Beam runner and train on its "
    "examples: sampler = GraphSampler(graph_schema=..., seeds=..., sampling_config=...)"
    ".with_beam_pipeline_args(['--runner=DataflowRunner', ...]); GnnTrainer(examples="
    "sampler.outputs['examples'], graph_schema=sampler.outputs['output_graph_schema'], ...).")

#: What to do instead, for the components whose answer is not :data:`PRESAMPLE_HINT`.
_TOO_LARGE_HINTS = {
    "GraphInferrer": (
        "Run it on Beam instead: GraphInferrer(..., inference_config="
        "{'engine': 'beam'}).with_beam_pipeline_args(['--runner=DataflowRunner', ...])."),
    "GraphEvaluator": (
        "GraphEvaluator holds the graph in memory. For a larger graph, pre-sample the test "
        "seeds' subgraphs with GraphSampler on a distributed Beam runner and evaluate them with "
        "the stock Evaluator (TFMA; no graph baselines, no degree slices)."),
}


def too_large_hint(who: str) -> str:
  """What ``who`` can do with a graph too large for one machine (ends a GraphTooLargeError)."""
  return _TOO_LARGE_HINTS.get(who, PRESAMPLE_HINT)


def shown_id(node_id: Any) -> str:
  """A node id as error messages show it: decoded text, not ``b'...'``."""
  return node_id.decode("utf-8", "replace") if isinstance(node_id, bytes) else str(node_id)


def format_ids(ids: Iterable[bytes]) -> str:
  """Up to :data:`MAX_IDS_IN_MESSAGE` of ``ids`` for an error message, sorted, deduplicated."""
  ids = sorted(set(ids))
  shown = ", ".join(repr(shown_id(i)) if isinstance(i, bytes) else repr(i)
                    for i in ids[:MAX_IDS_IN_MESSAGE])
  more = f" and {len(ids) - MAX_IDS_IN_MESSAGE} more" if len(ids) > MAX_IDS_IN_MESSAGE else ""
  return f"[{shown}{more}]"
