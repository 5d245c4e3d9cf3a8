"""beam_pipeline_args checked at compile time, per runner (Beam's own parser and validator)."""

import pytest

from gnn_trainer_component.deploy import beam_args

DATAFLOW = ["--runner=DataflowRunner", "--project=my-project", "--region=us-central1",
            "--temp_location=gs://my-bucket/tmp"]
FLINK = ["--runner=FlinkRunner", "--flink_master=flink-jobmanager:8081",
         "--environment_type=DOCKER", "--environment_config=us-docker.pkg.dev/p/r/beam:1"]


@pytest.mark.parametrize("args,runner", [
    ([], "DirectRunner"),
    (["--direct_running_mode=multi_processing", "--direct_num_workers=4"], "DirectRunner"),
    (DATAFLOW + ["--sdk_container_image=us-docker.pkg.dev/p/r/beam:1"], "DataflowRunner"),
    (DATAFLOW + ["--setup_file=./setup.py", "--staging_location=gs://my-bucket/staging"],
     "DataflowRunner"),
    (FLINK, "FlinkRunner"),
    (["--runner=SparkRunner", "--spark_master_url=spark://spark-master:7077",
      "--environment_type=EXTERNAL", "--environment_config=beam-worker-pool:50000"],
     "SparkRunner"),
    (["--runner=PortableRunner", "--job_endpoint=jobserver:8099", "--environment_type=PROCESS"],
     "PortableRunner"),
])
def test_good_args_name_their_runner(args, runner):
  assert beam_args.check(args) == runner


@pytest.mark.parametrize("args,message", [
    (["--runner=DataflowRunner"], "DataflowRunner needs --project. DataflowRunner needs "
     "--region. DataflowRunner needs --temp_location (gs://BUCKET/tmp)."),
    (DATAFLOW, "the workers need this project's packages"),
    (DATAFLOW[:3] + ["--temp_location=/tmp/x", "--setup_file=s.py"],
     "--temp_location=/tmp/x must be a gs:// path"),
    (["--runner=DataflowRunner", "--project=My_Project", "--region=us-central1",
      "--temp_location=gs://my-bucket/tmp", "--setup_file=s.py"], "Invalid Project ID (My_Project)"),
    (["--runner=FlinkRunner"], "FlinkRunner needs --flink_master=host:port of a cluster the "
     "pipeline step can reach, got '[auto]' (it would run inside the step)"),
    (FLINK[:2], "the SDK environment LOOPBACK (the default) runs the Python SDK workers inside"),
    (FLINK[:3], "--environment_type=DOCKER needs --environment_config (the SDK image)"),
    (["--runner=SparkRunner", "--environment_type=PROCESS"],
     "SparkRunner needs --spark_master_url=host:port"),
    (["--runner=Dataflow"], "is not one of ['DirectRunner', 'DataflowRunner', 'FlinkRunner', "
     "'SparkRunner', 'PortableRunner'] (did you mean DataflowRunner?)"),
    (["--projectt=x"], "flags Beam does not know: --projectt (did you mean --project?)"),
    (["--direct_num_workers=abc"], "argument --direct_num_workers: invalid int value: 'abc'"),
    (["--direct_num_workers=-1"], "--direct_num_workers must be >= 0"),
    (["runner=DataflowRunner"], "must be flags like '--runner=DataflowRunner'"),
])
def test_bad_args_are_named_with_what_to_write(args, message):
  with pytest.raises(beam_args.BeamArgsError) as e:
    beam_args.check(args)
  assert message in str(e.value)
