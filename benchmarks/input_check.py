"""Benchmark: what the training input pipeline's NaN/inf check costs.

  TF_USE_LEGACY_KERAS=1 python -m benchmarks.input_check \
      --examples <GraphSampler examples uri> --graph-schema <dir with graph_schema.pbtxt> \
      --module module_files/planetoid_gcn.py --hparams '{"num_classes": 7}' \
      --batch-size 140 --epochs 20 --repeats 3 \
      --output benchmarks/results/input_check_cora.json

Two input variants, interleaved (A, B, A, B, ...), medians over ``--repeats``:

* ``unchecked``: ``custom_config['check_finite_inputs'] = False``: serialized
  tf.Examples; the runner batches and parses them (what GnnTrainer did before
  the check existed, and what TF-GNN users write).
* ``checked``: the default: GnnTrainer's provider parses each record itself
  and asserts every float feature finite; the runner gets GraphTensors.

Two measures per variant: one pass over the train and eval datasets exactly
as the runner builds them (batch, parse if needed, merge components), and a
whole ``runner.run`` (KerasTrainer without checkpoints or summaries,
validation every epoch) for ``--epochs`` epochs. Writes one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

# First: Keras 2 for TF-GNN, before TensorFlow is imported.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner
from tensorflow_gnn.runner.utils import parsing as parsing_utils

from benchmarks import report
from gnn_trainer_component import graph_schema
from gnn_trainer_component.trainer import module_contract
from gnn_trainer_component.trainer import splits
from gnn_trainer_component.trainer import input_data

VARIANTS = ("unchecked", "checked")


def providers(variant, gtspec, train, valid):
  """(train, valid) DatasetProviders of ``variant``."""
  check = variant == "checked"
  return (input_data.dataset_provider(*train, gtspec, shuffle=True, check_finite=check),
          input_data.dataset_provider(*valid, gtspec, shuffle=False, check_finite=check))


def input_pass_seconds(provider, gtspec, batch_size) -> float:
  """Seconds for one pass over the dataset as runner.run builds it (no training)."""
  ds = provider.get_dataset(tf.distribute.InputContext()).batch(batch_size)
  ds = parsing_utils.maybe_parse_graph_tensor_dataset(ds, gtspec)
  ds = ds.map(tfgnn.GraphTensor.merge_batch_to_components)
  start = time.perf_counter()
  for _ in ds:
    pass
  return time.perf_counter() - start


def train_seconds(variant, user_module, gtspec, train, valid, batch_size, epochs) -> float:
  """Seconds of runner.run (model build, tracing and ``epochs`` epochs)."""
  train_provider, valid_provider = providers(variant, gtspec, train, valid)
  with tempfile.TemporaryDirectory() as model_dir:
    trainer = runner.KerasTrainer(
        strategy=tf.distribute.get_strategy(), model_dir=model_dir,
        checkpoint_every_n_steps="never", summarize_every_n_steps="never",
        backup_and_restore=False, restore_best_weights=False, verbose=0)
    start = time.perf_counter()
    runner.run(train_ds_provider=train_provider, valid_ds_provider=valid_provider,
               model_fn=user_module.model_fn, optimizer_fn=user_module.optimizer_fn,
               trainer=trainer, task=user_module.runner_task, gtspec=gtspec,
               global_batch_size=batch_size, epochs=epochs,
               feature_processors=user_module.feature_processors_fn(gtspec),
               export_dirs=[os.path.join(model_dir, "export")], model_exporters=[])
    return time.perf_counter() - start


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--examples", required=True, help="Examples artifact uri (Split-*/).")
  parser.add_argument("--graph-schema", required=True)
  parser.add_argument("--module", required=True)
  parser.add_argument("--hparams", type=json.loads, default={},
                      help='Module options as JSON, as custom_config["hparams"].')
  parser.add_argument("--train-split", default="train")
  parser.add_argument("--eval-split", default="eval")
  parser.add_argument("--batch-size", type=int, default=140)
  parser.add_argument("--epochs", type=int, default=20)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--output", default=None)
  args = parser.parse_args(argv)

  schema = graph_schema.read_artifact_schema(args.graph_schema)
  gtspec = tfgnn.create_graph_spec_from_schema_pb(schema)
  split_names = [d[len("Split-"):] for d in sorted(os.listdir(args.examples))
                 if d.startswith("Split-")]
  location = [splits.ExamplesLocation(uri=args.examples, split_names=split_names)]
  train = splits.resolve_split(location, [args.train_split], role="train_args")
  valid = splits.resolve_split(location, [args.eval_split], role="eval_args")
  user_module = module_contract.load_user_module(os.path.abspath(args.module), None, args.hparams)

  passes = {v: [] for v in VARIANTS}
  runs = {v: [] for v in VARIANTS}
  for _ in range(args.repeats):
    for variant in VARIANTS:
      train_p, valid_p = providers(variant, gtspec, train, valid)
      passes[variant].append(input_pass_seconds(train_p, gtspec, args.batch_size) +
                             input_pass_seconds(valid_p, gtspec, args.batch_size))
  for _ in range(args.repeats):
    for variant in VARIANTS:
      runs[variant].append(train_seconds(variant, user_module, gtspec, train, valid,
                                         args.batch_size, args.epochs))

  def summary(values):
    return {"median_s": round(statistics.median(values), 3),
            "all_s": [round(v, 3) for v in values]}

  result = {
      "examples": args.examples, "module": os.path.basename(args.module),
      "batch_size": args.batch_size, "epochs": args.epochs, "repeats": args.repeats,
      "input_pass": {v: summary(passes[v]) for v in VARIANTS},
      "runner_run": {v: summary(runs[v]) for v in VARIANTS},
      "checked_vs_unchecked": {
          "input_pass": round(statistics.median(passes["checked"]) /
                              statistics.median(passes["unchecked"]), 3),
          "runner_run": round(statistics.median(runs["checked"]) /
                              statistics.median(runs["unchecked"]), 3)},
  }
  report.print_result(result, args.output, indent=2)
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
