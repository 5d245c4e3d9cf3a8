"""Pipeline definitions and local runs of the repository (not installed with the package)."""

import os

#: The repository root (this folder's parent).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
