"""Scores a Cora link model of ``benchmarks.link_prediction`` on the whole message-passing graph.

The benchmark's test AUC / AP come from serving each held-out pair's sampled
subgraph (fan-outs 10, 5), as a deployed model is served. This script asks
how much of a whole-graph-trained model's gap is that mismatch: it builds the
message-passing graph of the run's split as one GraphTensor with the readout
of every held-out pair (the validation step of ``graph_mode: "full_graph"``),
serves it to the exported model as one request, and prints the AUC / AP of
``eval`` and ``test`` as one JSON line.

  PYTHONPATH=. python -m benchmarks.link_whole_graph_scores --work-dir DIR --seed 0

(``DIR``: the ``--work-dir`` of a ``benchmarks.link_prediction`` run of that seed.)
"""

import argparse
import json
import os
import sys


def main(argv=None) -> int:
  from gnn_trainer_component import process  # pylint: disable=g-import-not-at-top
  process.setup_process()
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from sklearn import metrics
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  from gnn_trainer_component.in_memory import adapters
  from gnn_trainer_component.in_memory import full_graph
  from benchmarks import link_prediction
  from pipelines.planetoid import pipeline as planetoid_pipeline
  # pylint: enable=g-import-not-at-top
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--work-dir", required=True)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  link = planetoid_pipeline.link_config(
      link_prediction.DEFAULT_FAN_OUTS, seed=args.seed, negatives_per_positive={
          "train": link_prediction.DEFAULT_TRAIN_NEGATIVES, "eval": 1, "test": 1})
  models = os.path.join(args.work_dir, "pipeline_root", "GnnTrainer", "model")
  model_dir = os.path.join(models, max(os.listdir(models), key=int), "Format-Serving")
  serve = tf.saved_model.load(model_dir).signatures["serving_default"]
  out = {"model": model_dir}
  for split in ("eval", "test"):
    splits = adapters.load(os.path.join(args.work_dir, "tables_cora"), link_config=link,
                           splits=[split])
    whole = full_graph.whole_graph_tensor(splits.message_graph)
    provider = splits.whole_provider(whole, [split], training=False, batch_size=1, seed=None)
    graph = next(iter(provider.get_dataset(tf.distribute.InputContext())))
    labels = graph.node_sets["_readout"]["label"].numpy()
    request = tf.constant([tfgnn.write_example(graph).SerializeToString()])
    scores = np.asarray(serve(examples=request)["logits"]).reshape(-1)
    out[split] = {"pairs": len(labels), "auc": round(metrics.roc_auc_score(labels, scores), 4),
                  "average_precision": round(metrics.average_precision_score(labels, scores), 4)}
  print(json.dumps(out))
  return 0


if __name__ == "__main__":
  sys.exit(main())
