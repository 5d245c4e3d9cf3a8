"""Deploying GnnTrainer pipelines to Kubeflow Pipelines 2.x and Vertex AI Pipelines.

* :mod:`deploy.compile`: TFX pipeline -> KFP v2 pipeline JSON/YAML with
  ``KubeflowV2DagRunner`` (``python -m deploy.compile --help``).
* :mod:`deploy.submit_vertex`: submit the JSON to Vertex AI Pipelines.
* :mod:`deploy.submit_kfp`: submit it (as YAML) to a Kubeflow Pipelines 2.x host.
* :mod:`deploy.pipeline_job`: helpers to read and check a compiled pipeline.

These modules run on the machine that compiles/submits (a laptop or CI), not
in the container image; the image only needs ``gnn_trainer_component``.
"""
