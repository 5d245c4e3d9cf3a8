"""What both GraphInferrer engines share: the request checked and the export loaded, the result.

:func:`prepare` reads the graph schema, the sampling config and the model's
signatures (:mod:`gnn_trainer_component.model.loading`) before either engine
(:mod:`in_memory`, :mod:`beam`, :mod:`full`) reads a table.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.model import loading
from gnn_trainer_component.model.loading import InferenceInputError

WHO = "GraphInferrer"


@dataclasses.dataclass(frozen=True)
class Result:
  """What one inference wrote."""
  node_set: str
  rows: int
  columns: list[str]
  seconds: float
  load_seconds: Optional[float] = None  # of ``seconds``: loading the tables (where measured)


def check_as_of(plan: Any, cfg: config_lib.InferenceConfig, who: str = WHO) -> None:
  """GraphInferrer's time rule, for both engines: ``as_of`` where, and only where, a hop has a time.

  Raises:
    GraphInputError: a time-aware hop without ``as_of``.
    InferenceInputError: ``as_of`` with timeless hops.
  """
  sampling.check_seed_times(plan, who, seed_times=cfg.as_of is not None,
                            how="inference_config 'as_of': the time every node is embedded as of")
  if cfg.as_of is not None and not plan.timed:
    raise InferenceInputError(
        f"{who} inference_config['as_of'] = {cfg.as_of!r} bounds time-aware sampling "
        "(uniform_before, latest), but no hop of the sampling config has a time. Drop as_of, "
        "or give the hops the time-aware strategy the model was trained with.")


def prepare(schema_dir: str, model_dir: str, cfg: config_lib.InferenceConfig,
            sampling_spec: Optional[str], sampling_config: Optional[Mapping[str, Any]],
            who: str = WHO) -> tuple[Any, Any, loading.Signatures]:
  """What both engines check first: ``(graph schema, SamplingPlan, signatures)``.

  Raises:
    InferenceInputError, GraphInputError: as :func:`infer`.
  """
  schema = graph_schema_lib.read_artifact_schema(schema_dir)
  plan = sampling.plan_from_params(schema, sampling_spec, sampling_config, who=who)
  return schema, plan, loading.load(model_dir, cfg.signatures, schema, plan.seed_node_set, who)
