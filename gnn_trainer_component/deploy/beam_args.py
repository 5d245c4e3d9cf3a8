"""Checks a pipeline's ``beam_pipeline_args`` before it is compiled for Vertex AI / Kubeflow.

GraphSampler, LinkSampler, GraphInferrer, StatisticsGen, Transform and Evaluator run Beam
pipelines with the TFX pipeline's ``beam_pipeline_args``. A wrong flag there
fails only when that step runs, often an hour into a pipeline; here it fails
at compile time, naming the flag and what to write. Parsing and the option
names are Beam's own (``apache_beam.options.pipeline_options``); for Dataflow
the offline checks of Beam's ``PipelineOptionsValidator`` run too (its full
``validate()`` would look up or create a GCS bucket).

What a pipeline step needs, by runner:

* ``DirectRunner`` (default): runs inside the step's container;
  ``--direct_running_mode=multi_processing --direct_num_workers=N`` uses N
  processes on that machine.
* ``DataflowRunner``: ``--project``, ``--region``, ``--temp_location=gs://...``, and
  the packages on the workers: ``--sdk_container_image`` (a Beam SDK image with
  this project installed) or ``--setup_file`` / ``--requirements_file`` /
  ``--extra_package``.
* ``FlinkRunner``: ``--flink_master=host:port`` of a cluster the step can reach
  (the default ``[auto]`` starts an embedded Flink inside the step), and an SDK
  environment the cluster can start: ``--environment_type=DOCKER`` (with
  ``--environment_config=<image>``), ``EXTERNAL`` or ``PROCESS``.
* ``SparkRunner``: ``--spark_master_url=spark://host:port`` (the default
  ``local[4]`` runs inside the step) and the same SDK environment rule.
* ``PortableRunner``: ``--job_endpoint=host:port`` and the same SDK environment rule.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import re
from typing import Sequence

from gnn_trainer_component import errors

_RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner", "PortableRunner")
_HOST_PORT = re.compile(r"^[A-Za-z0-9_.\-]+:\d{1,5}$")
_REMOTE_ENVIRONMENTS = ("DOCKER", "EXTERNAL", "PROCESS")


class BeamArgsError(errors.GnnError, ValueError):
  """``beam_pipeline_args`` that would fail (or run somewhere unintended) at run time."""


def _options(args: Sequence[str]):
  """Beam's parse of ``args``; raises BeamArgsError on unknown or ill-typed flags."""
  from apache_beam.options import pipeline_options  # Imported here: this module loads no Beam.
  bad = [a for a in args if not isinstance(a, str) or not a.startswith("--")]
  if bad:
    raise BeamArgsError(f"beam_pipeline_args must be flags like '--runner=DataflowRunner'; "
                        f"got {bad}.")
  options = pipeline_options.PipelineOptions(list(args))
  stderr = io.StringIO()
  try:
    with contextlib.redirect_stderr(stderr):
      known = options.get_all_options()
      with_unknown = options.get_all_options(retain_unknown_options=True)
  except SystemExit:
    lines = [line for line in stderr.getvalue().splitlines() if "error:" in line]
    said = lines[-1].split("error:", 1)[1].strip() if lines else stderr.getvalue()[-300:]
    raise BeamArgsError(f"beam_pipeline_args: {said}") from None
  unknown = sorted(set(with_unknown) - set(known))
  if unknown:
    hints = {u: difflib.get_close_matches(u, known, n=1) for u in unknown}
    said = ", ".join(f"--{u}" + (f" (did you mean --{h[0]}?)" if h else "")
                     for u, h in hints.items())
    raise BeamArgsError(f"beam_pipeline_args has flags Beam does not know: {said}.")
  return options, known


def _sdk_environment(opts: dict, runner: str) -> list[str]:
  env = (opts.get("environment_type") or "").upper()
  if env in _REMOTE_ENVIRONMENTS:
    if env in ("DOCKER", "EXTERNAL") and not opts.get("environment_config"):
      return [f"{runner}: --environment_type={env} needs --environment_config "
              f"({'the SDK image' if env == 'DOCKER' else 'host:port of the worker pool'})."]
    return []
  return [f"{runner}: the SDK environment {env or 'LOOPBACK (the default)'} runs the Python "
          "SDK workers inside the pipeline step, which the cluster cannot reach; use "
          "--environment_type=DOCKER --environment_config=<SDK image with this project>, "
          "or EXTERNAL / PROCESS."]


def check(args: Sequence[str]) -> str:
  """Checks ``beam_pipeline_args`` for a pipeline compiled for Vertex AI / Kubeflow.

  Args:
    args: The flags, e.g. ``["--runner=DataflowRunner", "--project=p", ...]``.

  Returns:
    The runner name (``DirectRunner`` when unset).

  Raises:
    BeamArgsError: every problem found, each naming the flag and what to write.
  """
  options, opts = _options(args)
  runner = opts.get("runner") or "DirectRunner"
  if runner not in _RUNNERS:
    close = difflib.get_close_matches(runner, _RUNNERS, n=1)
    raise BeamArgsError(f"beam_pipeline_args: --runner={runner} is not one of {list(_RUNNERS)}"
                        + (f" (did you mean {close[0]}?)" if close else "") + ".")
  problems = []
  if runner == "DirectRunner":
    if opts.get("direct_num_workers") is not None and opts["direct_num_workers"] < 0:
      problems.append("DirectRunner: --direct_num_workers must be >= 0 (0: one per core).")
  elif runner == "DataflowRunner":
    for flag in ("project", "region", "temp_location"):
      if not opts.get(flag):
        problems.append(f"DataflowRunner needs --{flag}"
                        + (" (gs://BUCKET/tmp)" if flag == "temp_location" else "") + ".")
    for flag in ("temp_location", "staging_location"):
      if opts.get(flag) and not opts[flag].startswith("gs://"):
        problems.append(f"DataflowRunner: --{flag}={opts[flag]} must be a gs:// path.")
    if not any(opts.get(f) for f in ("sdk_container_image", "setup_file", "requirements_file",
                                     "extra_packages")):
      problems.append("DataflowRunner: the workers need this project's packages (TF-GNN, TFX, "
                      "gnn_trainer_component): pass --sdk_container_image=<a Beam SDK image "
                      "with them> or --setup_file / --requirements_file / --extra_package.")
    if not problems:  # Beam's own checks of the project id, gs:// paths and job name
      from apache_beam.options import pipeline_options
      from apache_beam.options import pipeline_options_validator
      from apache_beam.runners.dataflow import dataflow_runner
      validator = pipeline_options_validator.PipelineOptionsValidator(
          options, dataflow_runner.DataflowRunner())
      cloud = options.view_as(pipeline_options.GoogleCloudOptions)
      problems += validator.validate_cloud_options(cloud)
      for flag in ("temp_location", "staging_location"):
        if opts.get(flag):
          problems += validator.validate_gcs_path(cloud, flag)
  else:
    endpoint_flag = {"FlinkRunner": "flink_master", "SparkRunner": "spark_master_url",
                     "PortableRunner": "job_endpoint"}[runner]
    endpoint = opts.get(endpoint_flag) or ""
    target = endpoint.split("://", 1)[-1]
    if not _HOST_PORT.match(target):
      problems.append(f"{runner} needs --{endpoint_flag}=host:port of a cluster the pipeline "
                      f"step can reach, got {endpoint or 'nothing'!r}"
                      + (" (it would run inside the step)" if endpoint in ("[auto]", "[local]")
                         or endpoint.startswith("local") else "") + ".")
    problems += _sdk_environment(opts, runner)
  if problems:
    raise BeamArgsError("beam_pipeline_args: " + " ".join(problems))
  return runner
