"""Deploying GnnTrainer pipelines to Kubeflow Pipelines 2.x and Vertex AI Pipelines.

Installed with the package, so ``pip install gnn-trainer-component[kfp]`` is
enough to compile and submit (console scripts in pyproject.toml):

* :mod:`gnn_trainer_component.deploy.compile` (``gnn-kfp-compile``): TFX pipeline
  -> KFP v2 pipeline JSON/YAML with ``KubeflowV2DagRunner``. ``--pipeline``
  names a factory (``package.module:function``) or ``demo``, the repository's
  demo pipeline (``pipelines/demo``, imported only when chosen).
* :mod:`gnn_trainer_component.deploy.machines`: what the compiled steps run on
  and in: the GnnTrainer step's machine, a trainer CustomJob's worker pools, the
  GPU image; :mod:`gnn_trainer_component.deploy.errors`: ``CompileError``.
* :mod:`gnn_trainer_component.deploy.submit_vertex` (``gnn-vertex-submit``):
  submit the JSON to Vertex AI Pipelines.
* :mod:`gnn_trainer_component.deploy.submit_kfp` (``gnn-kfp-submit``): submit it
  (as YAML) to a Kubeflow Pipelines 2.x host.
* :mod:`gnn_trainer_component.deploy.pipeline_job`: reading and checking a
  compiled pipeline, and the command-line helpers the three share;
  :mod:`gnn_trainer_component.deploy.submit`: what the two submitters share.
* :mod:`gnn_trainer_component.deploy.beam_args`: checking the Beam steps' flags.

These modules run on the machine that compiles/submits (a laptop or CI), not
in the container image (``kubeflow/Dockerfile``; the image only runs the
components). Only compiling imports TFX; the submitters (and their
``--dry-run``) do not. The top-level ``kubeflow/`` folder of the repository
holds the Dockerfiles and a thin entry script (the deployment guide is
docs/deployment.md), and no Python package, so nothing shadows the Kubeflow
SDK's ``kubeflow`` namespace.
"""
