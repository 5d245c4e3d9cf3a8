"""Worker pools of a CustomJob and the cluster each replica sees: pure dicts in, dicts out.

Worker pool ``i`` holds task type :data:`TASK_OF_POOL` ``[i]``, as Vertex AI maps
pools for TensorFlow: 0 the chief (one replica), 1 the workers, 2 the parameter
servers. Vertex AI sets ``CLUSTER_SPEC`` (pools by name) and ``TF_CONFIG`` in
every replica; :func:`tf_config_from_cluster_spec` derives the second from the
first when only ``CLUSTER_SPEC`` is there. No TensorFlow, no TFX: ``config``
imports this module to check a job before any pipeline runs.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from gnn_trainer_component import errors

#: Task type of each worker pool, by position (Vertex AI's mapping for TensorFlow).
TASK_OF_POOL = ("chief", "worker", "ps", "evaluator")


def local_job_spec(workers: int, parameter_servers: int = 0) -> dict[str, Any]:
  """The ``job_spec`` of a job on this machine: a chief, workers, parameter servers."""
  pools = [{"replica_count": 1}, {"replica_count": workers - 1}]
  if parameter_servers:
    pools.append({"replica_count": parameter_servers})
  return {"worker_pool_specs": pools}


def replica_count(pool: Mapping[str, Any]) -> int:
  """Replicas of a worker pool (an empty placeholder pool ``{}`` has none)."""
  return int(pool.get("replica_count", 1 if pool else 0))


def training_replicas(job_spec: Mapping[str, Any]) -> int:
  """Replicas that train in sync (chief + workers) under MultiWorkerMirroredStrategy."""
  return sum(replica_count(p) for p in job_spec["worker_pool_specs"][:2])


def cluster_spec(addresses: Sequence[Sequence[str]], pool: int, index: int) -> dict[str, Any]:
  """The ``CLUSTER_SPEC`` Vertex AI sets in replica ``index`` of worker pool ``pool``.

  Args:
    addresses: ``host:port`` of every replica, per pool (empty for an empty pool).
    pool: This replica's pool.
    index: Its index in the pool.
  """
  cluster = {f"workerpool{i}": list(a) for i, a in enumerate(addresses) if a}
  return {"cluster": cluster, "environment": "cloud",
          "task": {"type": f"workerpool{pool}", "index": index}}


class ClusterSpecError(errors.GnnError, ValueError):
  """``CLUSTER_SPEC`` is not what Vertex AI sets."""


def tf_config_from_cluster_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
  """The ``TF_CONFIG`` Vertex AI sets next to ``CLUSTER_SPEC``: pools renamed to tasks.

  ``workerpool0`` -> ``chief``, ``workerpool1`` -> ``worker``, ``workerpool2`` ->
  ``ps``; an evaluator (``workerpool3``) is not part of the training cluster.

  Raises:
    ClusterSpecError: a pool name other than ``workerpool0``..``workerpool3``.
  """
  def task_type(pool_name: str) -> str:
    number = pool_name[len("workerpool"):]
    if not pool_name.startswith("workerpool") or not number.isdigit() or int(number) > 3:
      raise ClusterSpecError(
          f"CLUSTER_SPEC names pool {pool_name!r}; Vertex AI names them workerpool0 "
          f"(chief) .. workerpool3 (evaluator). CLUSTER_SPEC: {json.dumps(dict(spec))}")
    return TASK_OF_POOL[int(number)]

  cluster = {task_type(name): list(addrs) for name, addrs in spec.get("cluster", {}).items()}
  cluster.pop("evaluator", None)
  task = spec.get("task", {})
  return {"cluster": cluster,
          "task": {"type": task_type(task.get("type", "workerpool0")),
                   "index": int(task.get("index", 0))},
          "environment": spec.get("environment", "cloud")}
