"""Transform module for the demo pipeline (tfx.components.Transform).

Graph tf.Examples are flat features; `preprocess_graph_features` passes every
key through untouched (graph structure: #size, #source, #target, labels) and
applies element-wise TFT functions to the listed node features.
"""

import tensorflow_transform as tft

from gnn_trainer_component.trainer import transform as gnn_transform


def preprocessing_fn(inputs):
  return gnn_transform.preprocess_graph_features(inputs, {
      "nodes/paper.feat": tft.scale_to_z_score,
      "nodes/paper.venue": lambda v: tft.compute_and_apply_vocabulary(v, num_oov_buckets=1),
  })
