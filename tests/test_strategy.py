"""Unit tests for the chief and strategy choice from TF_CONFIG (no cluster is started)."""

import json
import os

import pytest
import tensorflow as tf

from gnn_trainer_component.distributed import job_spec as job_spec_lib

from gnn_trainer_component.distributed import strategy


def _tf_config(monkeypatch, cluster, task_type=None, index=0):
  config = {"cluster": cluster}
  if task_type:
    config["task"] = {"type": task_type, "index": index}
  monkeypatch.setenv("TF_CONFIG", json.dumps(config))


@pytest.mark.parametrize("cluster,task_type,index,chief", [
    ({"worker": ["h:1", "h:2"]}, "worker", 0, True),
    ({"worker": ["h:1", "h:2"]}, "worker", 1, False),
    ({"chief": ["h:0"], "worker": ["h:1"]}, "chief", 0, True),
    ({"chief": ["h:0"], "worker": ["h:1"]}, "worker", 0, False),
    ({"chief": ["h:0"], "worker": ["h:1"], "ps": ["h:2"]}, "ps", 0, False),
    ({"worker": ["h:1"]}, None, 0, True),
])
def test_is_chief(monkeypatch, cluster, task_type, index, chief):
  _tf_config(monkeypatch, cluster, task_type, index)
  assert strategy.is_chief() is chief


def test_no_tf_config_is_one_chief_process(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  assert strategy.is_chief()
  assert strategy.make_strategy() is tf.distribute.get_strategy()


def test_local_job_replicas_get_vertex_env_with_one_chief_and_distinct_ports(monkeypatch):
  from gnn_trainer_component.distributed import custom_job, local_cluster  # pylint: disable=g-import-not-at-top
  ports = local_cluster.free_ports(3)
  assert len(set(ports)) == 3
  spec = job_spec_lib.local_job_spec(3)
  replicas = local_cluster.tasks(spec)
  assert [t for _, _, t in replicas] == ["chief:0", "worker:0", "worker:1"]
  chiefs = []
  for pool, index, _ in replicas:
    env = local_cluster.replica_env(spec, ports, pool, index)
    config = json.loads(env["TF_CONFIG"])
    assert config["cluster"] == {"chief": [f"127.0.0.1:{ports[0]}"],
                                 "worker": [f"127.0.0.1:{p}" for p in ports[1:]]}
    assert json.loads(env["CLUSTER_SPEC"])["cluster"] == {
        "workerpool0": [f"127.0.0.1:{ports[0]}"],
        "workerpool1": [f"127.0.0.1:{p}" for p in ports[1:]]}
    monkeypatch.setenv("TF_CONFIG", env["TF_CONFIG"])
    assert strategy.cluster_workers() == 3
    chiefs.append(strategy.is_chief())
  assert chiefs == [True, False, False]
  assert strategy.task_name() == "worker 1"


def test_the_cluster_is_read_from_vertex_cluster_spec_without_tf_config(monkeypatch):
  """Vertex AI's CLUSTER_SPEC (pools by position) -> the cluster TF_CONFIG would name;
  the environment is not written."""
  cluster_spec = {"cluster": {"workerpool0": ["cmle-training-workerpool0-ab-0:2222"],
                              "workerpool1": ["cmle-training-workerpool1-ab-0:2222",
                                              "cmle-training-workerpool1-ab-1:2222"],
                              "workerpool2": ["cmle-training-workerpool2-ab-0:2222"]},
                  "environment": "cloud", "task": {"type": "workerpool1", "index": 1}}
  monkeypatch.setenv("TF_CONFIG", "")  # unset for TF; restored after the test
  monkeypatch.setenv("CLUSTER_SPEC", json.dumps(cluster_spec))
  resolver = strategy.cluster_resolver()
  assert resolver.cluster_spec().as_dict() == {
      "chief": cluster_spec["cluster"]["workerpool0"],
      "worker": cluster_spec["cluster"]["workerpool1"],
      "ps": cluster_spec["cluster"]["workerpool2"]}
  assert (resolver.task_type, resolver.task_id) == ("worker", 1)
  assert strategy.task_name() == "worker 1" and strategy.serves_only()
  assert os.environ["TF_CONFIG"] == ""
  # A TF_CONFIG that is already there wins (Vertex AI sets both).
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["h:1"]}}))
  assert strategy.cluster_workers() == 1


@pytest.mark.parametrize("value,match", [
    ("{not json", "CLUSTER_SPEC is not JSON"),
    (json.dumps({"cluster": {"pool0": ["h:1"]}, "task": {"type": "pool0", "index": 0}}),
     "names pool 'pool0'"),
])
def test_a_bad_cluster_spec_is_named(monkeypatch, value, match):
  monkeypatch.setenv("TF_CONFIG", "")
  monkeypatch.setenv("CLUSTER_SPEC", value)
  with pytest.raises(job_spec_lib.ClusterSpecError, match=match):
    strategy.cluster_resolver()


def test_an_evaluator_pool_is_not_part_of_the_training_cluster():
  config = job_spec_lib.tf_config_from_cluster_spec(
      {"cluster": {"workerpool0": ["a:1"], "workerpool3": ["e:1"]},
       "task": {"type": "workerpool3", "index": 0}})
  assert config["cluster"] == {"chief": ["a:1"]}
  assert config["task"]["type"] == "evaluator"


def test_the_default_strategy_needs_no_step_counts(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  assert strategy.cluster_workers() == 0
  assert not strategy.needs_step_counts(tf.distribute.get_strategy())


@pytest.mark.parametrize("cluster,missing", [
    ({"worker": ["h:1", "h:2"], "ps": ["h:3"]}, "no chief"),
    ({"chief": ["h:0"], "ps": ["h:3"]}, "no workers"),
])
def test_parameter_servers_need_a_chief_and_workers(monkeypatch, cluster, missing):
  _tf_config(monkeypatch, cluster, "chief" if "chief" in cluster else "worker", 0)
  with pytest.raises(strategy.StrategyError, match=f"has 'ps' tasks but {missing}"):
    strategy.make_strategy()


def test_workers_and_ps_tasks_of_a_parameter_server_cluster_only_serve(monkeypatch):
  cluster = {"chief": ["h:0"], "worker": ["h:1", "h:2"], "ps": ["h:3"]}
  for task_type, serves in (("chief", False), ("worker", True), ("ps", True)):
    _tf_config(monkeypatch, cluster, task_type, 0)
    assert strategy.parameter_server_cluster()
    assert strategy.serves_only() is serves
  _tf_config(monkeypatch, {"chief": ["h:0"], "worker": ["h:1"]}, "worker", 0)
  assert not strategy.serves_only()


def test_strategy_names_are_the_public_ones():
  assert strategy.strategy_name(tf.distribute.get_strategy()) == "_DefaultDistributionStrategy"
  assert strategy.strategy_name(tf.distribute.MirroredStrategy(["/cpu:0"])) == "MirroredStrategy"
