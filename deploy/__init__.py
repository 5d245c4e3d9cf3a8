"""Deploying GnnTrainer pipelines to Kubeflow Pipelines 2.x and Vertex AI Pipelines.

* :mod:`deploy.compile`: TFX pipeline -> KFP v2 pipeline JSON/YAML with
  ``KubeflowV2DagRunner`` (``python -m deploy.compile --help``).
* :mod:`deploy.submit_vertex`: submit the JSON to Vertex AI Pipelines
  (``python -m deploy.submit_vertex``).
* :mod:`deploy.submit_kfp`: submit it (as YAML) to a Kubeflow Pipelines 2.x host
  (``python -m deploy.submit_kfp``).
* :mod:`deploy.pipeline_job`: reading and checking a compiled pipeline, and the
  command-line helpers the three share.
* ``deploy/Dockerfile`` (current stack) and ``deploy/Dockerfile.tfx116``: the image
  every pipeline step runs in.

These modules run on the machine that compiles/submits (a laptop or CI), not
in the container image; the image only needs ``gnn_trainer_component``. Only
compiling imports TFX; the submitters (and their ``--dry-run``) do not.
The package is called ``deploy``, not ``kubeflow``, so that it does not shadow
the ``kubeflow`` SDK namespace. See deploy/README.md.
"""
