"""The distribution strategy and the chief of a GnnTrainer execution, from its cluster.

The cluster is read through TensorFlow's own cluster resolvers
(:func:`cluster_resolver`): ``TFConfigClusterResolver`` for ``TF_CONFIG``, as
Vertex AI and Kubeflow set it for worker replicas, else one built from Vertex
AI's ``CLUSTER_SPEC``. Nothing here writes the environment.
"""

from __future__ import annotations

import json
import os

from absl import logging
import tensorflow as tf

from gnn_trainer_component import errors
from gnn_trainer_component.distributed import job_spec as job_spec_lib


def cluster_resolver() -> tf.distribute.cluster_resolver.ClusterResolver:
  """This process's cluster: ``TF_CONFIG``, else Vertex AI's ``CLUSTER_SPEC``.

  Vertex AI sets both in every replica of a CustomJob; a platform (or an older
  container setup) that sets only ``CLUSTER_SPEC`` still gets its cluster, read
  from it as TensorFlow reads ``TF_CONFIG`` (the environment is never written).

  Raises:
    job_spec_lib.ClusterSpecError: ``CLUSTER_SPEC`` is not JSON or names unknown pools.
  """
  if os.environ.get("TF_CONFIG") or not os.environ.get("CLUSTER_SPEC"):
    return tf.distribute.cluster_resolver.TFConfigClusterResolver()
  try:
    spec = json.loads(os.environ["CLUSTER_SPEC"])
  except json.JSONDecodeError as e:
    raise job_spec_lib.ClusterSpecError(
        f"CLUSTER_SPEC is not JSON ({e}): {os.environ['CLUSTER_SPEC'][:200]!r}") from e
  config = job_spec_lib.tf_config_from_cluster_spec(spec)
  return tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec(config["cluster"]), task_type=config["task"]["type"],
      task_id=config["task"]["index"], rpc_layer="grpc")


def log_cluster() -> None:
  """Logs where this process's cluster comes from (nothing without one)."""
  if os.environ.get("TF_CONFIG"):
    logging.info("GnnTrainer: cluster from TF_CONFIG")
  elif os.environ.get("CLUSTER_SPEC"):
    resolver = cluster_resolver()
    logging.info("GnnTrainer: cluster from CLUSTER_SPEC (no TF_CONFIG): %s, this task %s %d",
                 resolver.cluster_spec().as_dict(), resolver.task_type, resolver.task_id)


def _num_workers(resolver) -> int:
  cluster = resolver.cluster_spec().as_dict()
  return sum(len(cluster.get(job, ())) for job in ("chief", "worker"))


def cluster_workers() -> int:
  """Training processes (chief + workers) ``TF_CONFIG`` names; 0 without a cluster."""
  return _num_workers(cluster_resolver())


def task_name() -> str:
  """This process's task, e.g. ``"worker 1"``; ``"chief"`` without ``TF_CONFIG``."""
  resolver = cluster_resolver()
  if not resolver.task_type:
    return "chief"
  return f"{resolver.task_type} {resolver.task_id or 0}"


def needs_step_counts(strategy: tf.distribute.Strategy) -> bool:
  """Whether the strategy distributes datasets (then Keras needs step counts)."""
  return strategy.num_replicas_in_sync > 1 or isinstance(
      strategy, (tf.distribute.MultiWorkerMirroredStrategy,
                 tf.distribute.experimental.ParameterServerStrategy))


class StrategyError(errors.GnnError, ValueError):
  """``TF_CONFIG`` describes a cluster GnnTrainer cannot train on."""


def parameter_server_cluster() -> bool:
  """Whether ``TF_CONFIG`` names ``ps`` tasks (ParameterServerStrategy)."""
  return "ps" in cluster_resolver().cluster_spec().as_dict()


def serves_only() -> bool:
  """A ``worker`` or ``ps`` task of a parameter-server cluster: it serves, the chief trains."""
  return parameter_server_cluster() and cluster_resolver().task_type in ("worker", "ps")


def serve() -> None:
  """Runs this task's ``tf.distribute.Server`` until the process is stopped."""
  resolver = cluster_resolver()
  server = tf.distribute.Server(
      resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id,
      protocol=resolver.rpc_layer or "grpc", start=True)
  server.join()


def strategy_name(strategy: tf.distribute.Strategy) -> str:
  """The public name of a strategy (MWMS's class is CollectiveAllReduceStrategy)."""
  for cls, name in ((tf.distribute.MultiWorkerMirroredStrategy, "MultiWorkerMirroredStrategy"),
                    (tf.distribute.experimental.ParameterServerStrategy,
                     "ParameterServerStrategy"),
                    (tf.distribute.MirroredStrategy, "MirroredStrategy")):
    if isinstance(strategy, cls):
      return name
  return type(strategy).__name__


def make_strategy() -> tf.distribute.Strategy:
  """The distribution strategy for this process.

  Must run before any other TF op (collective ops are configured at start-up):
  ``TF_CONFIG`` with ``ps`` tasks -> TF-GNN's ParameterServerStrategy (on the
  chief, the coordinator; its workers and ps tasks only :func:`serve`); with
  several workers -> MultiWorkerMirroredStrategy; several local GPUs ->
  MirroredStrategy; else the default strategy.

  Raises:
    StrategyError: ``ps`` tasks without a ``chief``.
  """
  resolver = cluster_resolver()
  cluster = resolver.cluster_spec().as_dict()
  if "ps" in cluster:
    if "chief" not in cluster or not cluster.get("worker"):
      raise StrategyError(
          f"TF_CONFIG cluster {sorted(cluster)} has 'ps' tasks but "
          f"{'no chief' if 'chief' not in cluster else 'no workers'}: "
          "ParameterServerStrategy needs a 'chief' (the coordinator), 'worker' tasks and "
          "'ps' tasks.")
    # TF-GNN's runner.ParameterServerStrategy, with this process's resolver (it reads TF_CONFIG).
    from tensorflow_gnn.runner.utils import strategies
    return tf.distribute.ParameterServerStrategy(
        resolver, variable_partitioner=strategies.MinSizePartitioner(
            max_shards=resolver.cluster_spec().num_tasks("ps")))
  if _num_workers(resolver) > 1:
    return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
  if len(tf.config.list_logical_devices("GPU")) > 1:
    return tf.distribute.MirroredStrategy()
  return tf.distribute.get_strategy()


def is_chief() -> bool:
  """True unless ``TF_CONFIG`` names this process a non-chief task.

  The chief is the ``chief`` task if the cluster has one, else worker 0 (as in
  ``MultiWorkerMirroredStrategy``); without ``TF_CONFIG`` the process is the chief.
  """
  resolver = cluster_resolver()
  task_type, index = resolver.task_type, resolver.task_id or 0
  if not task_type:
    return True
  if "chief" in resolver.cluster_spec().as_dict():
    return task_type == "chief"
  return task_type in ("worker", "master") and index == 0
