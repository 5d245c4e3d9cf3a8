"""What a client of the pushed model does: score one serialized graph tf.Example.

  python pipelines/quickstart/serve.py SAVED_MODEL_DIR REQUEST_FILE

``REQUEST_FILE`` holds one serialized tf.Example in GraphSampler's format (a
sampled subgraph, its seed first). Imports TensorFlow only: neither TF-GNN nor
this repository is needed to serve. Prints one JSON line:
``{"class_id": int, "probabilities": [float, ...]}``.
"""

import json
import sys

import tensorflow as tf


def predict(saved_model_dir: str, request: bytes) -> dict:
  """The class probabilities of the seed of one serialized example."""
  serving_default = tf.saved_model.load(saved_model_dir).signatures["serving_default"]
  logits = serving_default(examples=tf.constant([request]))["logits"]
  probabilities = tf.nn.softmax(logits[0]).numpy()
  return {"class_id": int(probabilities.argmax()),
          "probabilities": [round(float(p), 4) for p in probabilities]}


if __name__ == "__main__":
  with open(sys.argv[2], "rb") as f:
    print(json.dumps(predict(sys.argv[1], f.read())))
