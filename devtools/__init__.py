"""Development and CI tooling: not part of the installed package, run from a checkout.

* :mod:`devtools.containers`: builds ``kubeflow/Dockerfile`` with podman on a
  machine without a registry or Docker (``python -m devtools.containers``).
* :mod:`devtools.local_launcher`: runs a compiled KFP v2 pipeline task by task,
  each in a container, as the KFP v2 launcher does.
* :mod:`devtools.run_in_containers`: ``make demo-containers``, the two above
  end to end on the compiled demo pipeline.
* :mod:`devtools.mariadb`: a private MariaDB server for the MLMD-server tests.
* :mod:`devtools.soak`: the crash soak (``python -m devtools.soak``) and its child
  process :mod:`devtools.pipeline_child`, also used by the kill/resume tests.
"""

import os

#: The repository root (this folder's parent).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
