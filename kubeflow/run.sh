#!/usr/bin/env bash
# The compile / submit commands of docs/deployment.md, run from a checkout: the stack's venv
# (scripts/stack.sh; $PYTHON overrides it), Keras 2 for TF-GNN, and the repository on
# PYTHONPATH (the demo pipeline, --pipeline demo, lives in pipelines/, which is not installed).
# After `pip install 'gnn-trainer-component[kfp]'` the same commands are the console scripts
# gnn-kfp-compile, gnn-vertex-submit and gnn-kfp-submit (pyproject.toml).
#
#   kubeflow/run.sh compile --image $IMAGE --pipeline-root gs://B/root --module-file ... --output F.json
#   kubeflow/run.sh submit-vertex --pipeline-file F.json --project P --region R ...
#   kubeflow/run.sh submit-kfp --pipeline-file F.json --host http://... ...
#   kubeflow/run.sh containers [--install]   # make demo-containers: podman build + run (root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
  compile) module=gnn_trainer_component.deploy.compile ;;
  submit-vertex) module=gnn_trainer_component.deploy.submit_vertex ;;
  submit-kfp) module=gnn_trainer_component.deploy.submit_kfp ;;
  containers) module=devtools.run_in_containers ;;
  *) echo "usage: kubeflow/run.sh compile|submit-vertex|submit-kfp|containers [ARGS...]" \
       "(docs/deployment.md)" >&2
     exit 2 ;;
esac
shift
python=${PYTHON:-$root/$("$root/scripts/stack.sh" venv)/bin/python}
export TF_USE_LEGACY_KERAS=1 PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" -m "$module" "$@"
