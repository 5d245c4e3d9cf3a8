"""HyperParameters and base_model inputs of the real executor (warm start)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import training
from tests.helpers import (assert_nothing_published, demo_examples_artifact, demo_records,
                           run_executor)

pytestmark = pytest.mark.slow

SMALL = {"units": 16, "message_dim": 16}


@pytest.fixture(scope="module")
def examples_uri(demo_data, tmp_path_factory):
  return demo_examples_artifact(demo_data, str(tmp_path_factory.mktemp("examples")))


@pytest.fixture(scope="module")
def base_model(examples_uri, demo_data, tmp_path_factory):
  tmp = str(tmp_path_factory.mktemp("base"))
  model, _ = run_executor(tmp, examples_uri=examples_uri,
                          graph_schema_dir=demo_data["graph_schema"],
                          train_steps=80, hyperparameters=SMALL,
                          custom_config={"global_batch_size": 32, "epochs": 2, "seed": 2,
                                         "summarize_every_n_steps": "never"})
  return model


def _eval_accuracy(model_uri, records):
  sig = tf.saved_model.load(os.path.join(model_uri, "Format-Serving")).signatures["serving_default"]
  logits = sig(examples=tf.constant(records))["logits"].numpy()
  labels = [tf.train.Example.FromString(r).features.feature["context/label"].int64_list.value[0]
            for r in records]
  return float(np.mean(np.argmax(logits, 1) == np.array(labels))), logits


def test_hyperparameters_reach_model_fn(base_model):
  variables = os.path.join(base_model.uri, "Format-Serving", "variables", "variables")
  widths = {shape[-1] for _, shape in tf.train.list_variables(variables) if len(shape) == 2}
  assert 16 in widths and 32 not in widths, widths  # demo default is 32 units
  assert base_model.get_int_custom_property("train_steps") == 80


def test_warm_start_continues_from_base_model(base_model, examples_uri, demo_data, tmp_path):
  records = demo_records(demo_data, "eval")
  base_acc, base_logits = _eval_accuracy(base_model.uri, records)
  # One step at a negligible learning rate: the result is the base model.
  model, _ = run_executor(str(tmp_path), examples_uri=examples_uri,
                          graph_schema_dir=demo_data["graph_schema"], train_steps=1,
                          base_model_uri=base_model.uri,
                          hyperparameters=dict(SMALL, learning_rate=1e-12, dropout=0.0))
  acc, logits = _eval_accuracy(model.uri, records)
  assert acc == pytest.approx(base_acc, abs=1e-6)
  np.testing.assert_allclose(logits, base_logits, atol=1e-3)
  assert base_acc > 0.5


REFRESH = {"global_batch_size": 16, "epochs": 1, "summarize_every_n_steps": "never",
           "refresh_only": True}


def test_refresh_only_exports_the_base_models_weights_untrained(
    base_model, examples_uri, demo_data, tmp_path):
  """Nothing trains: the export answers as the base model, its eval metrics are one evaluation
  on eval_args' splits, and the Model says where its weights come from."""
  records = demo_records(demo_data, "eval")
  _, base_logits = _eval_accuracy(base_model.uri, records)
  model, _ = run_executor(str(tmp_path), examples_uri=examples_uri,
                          graph_schema_dir=demo_data["graph_schema"], train_steps=80,
                          base_model_uri=base_model.uri, hyperparameters=SMALL,
                          custom_config=REFRESH)
  _, logits = _eval_accuracy(model.uri, records)
  np.testing.assert_allclose(logits, base_logits, atol=1e-6)
  assert model.get_int_custom_property("train_steps") == 0
  assert model.get_int_custom_property("epochs") == 0
  assert model.get_string_custom_property("refreshed_from").startswith(base_model.uri)
  assert 0.0 < model.get_float_custom_property("eval_loss") < 10.0


@pytest.mark.reliability
def test_selection_by_ranking_on_examples_is_refused_by_name(examples_uri, demo_data, tmp_path):
  """``val_retrieval_*`` ranks against the graph in memory: examples have none to rank."""
  with pytest.raises(config_lib.ConfigError, match=r"'max:val_retrieval_mrr' ranks the "
                     r"validation edges against every node: it needs link prediction on the "
                     r"graph in memory"):
    run_executor(str(tmp_path), examples_uri=examples_uri,
                 graph_schema_dir=demo_data["graph_schema"],
                 custom_config={"restore_best_weights": True,
                                "restore_best_weights_by": "max:val_retrieval_mrr"})
  assert_nothing_published(str(tmp_path))


@pytest.mark.reliability
def test_refresh_only_without_base_model_is_refused_by_name(examples_uri, demo_data, tmp_path):
  with pytest.raises(config_lib.ConfigError, match="'refresh_only' .* has no base_model"):
    run_executor(str(tmp_path), examples_uri=examples_uri,
                 graph_schema_dir=demo_data["graph_schema"], custom_config=REFRESH)
  assert_nothing_published(str(tmp_path))


@pytest.mark.reliability
@pytest.mark.parametrize("custom_config", [None, REFRESH], ids=["warm_start", "refresh_only"])
def test_base_model_with_other_architecture_is_refused(custom_config,base_model, examples_uri, demo_data,
                                                      tmp_path):
  with pytest.raises(training.TrainingError, match=r"base_model at .* does not match the "
                                                   r"model built by model_fn \(.*shape"):
    run_executor(str(tmp_path), examples_uri=examples_uri,
                 graph_schema_dir=demo_data["graph_schema"], train_steps=1,
                 base_model_uri=base_model.uri,  # default 32 units vs 16
                 custom_config=custom_config)
  assert_nothing_published(str(tmp_path))
