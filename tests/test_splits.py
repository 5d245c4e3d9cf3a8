"""Unit tests for split/file resolution on ExampleGen-style folders."""

import gzip
import os

import pytest

from gnn_trainer_component.trainer import splits


def _touch(path, data=b"x"):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(data)


def test_exampledgen_layout_resolves_gzip(tmp_path):
  uri = str(tmp_path / "examples")
  _touch(f"{uri}/Split-train/data_tfrecord-00001-of-00002.gz", gzip.compress(b"a"))
  _touch(f"{uri}/Split-train/data_tfrecord-00000-of-00002.gz", gzip.compress(b"b"))
  _touch(f"{uri}/Split-eval/data_tfrecord-00000-of-00001.gz", gzip.compress(b"c"))
  loc = splits.ExamplesLocation(uri, ["train", "eval"], "tfrecords_gzip")
  files, comp = splits.resolve_split([loc], ["train"], role="train_args")
  assert comp == "GZIP"
  assert [os.path.basename(f) for f in files] == [
      "data_tfrecord-00000-of-00002.gz", "data_tfrecord-00001-of-00002.gz"]


def test_compression_from_property_or_suffix():
  assert splits.compression_type("tfrecord", ["a.gz"]) is None
  assert splits.compression_type(None, ["a.gz", "b.gz"]) == "GZIP"
  assert splits.compression_type(None, ["a.tfrecord"]) is None
  with pytest.raises(splits.SplitError, match="file_format 'parquet' is not supported"):
    splits.compression_type("parquet", [])


def test_missing_split_names_the_available_ones(tmp_path):
  loc = splits.ExamplesLocation(str(tmp_path), ["train", "eval"])
  with pytest.raises(splits.SplitError, match=r"eval_args.splits asks for split 'test'.*has splits \['train', 'eval'\]"):
    splits.resolve_split([loc], ["test"], role="eval_args")


def test_missing_directory(tmp_path):
  loc = splits.ExamplesLocation(str(tmp_path), [])
  with pytest.raises(splits.SplitError, match="Split-train does not exist"):
    splits.resolve_split([loc], ["train"], role="train_args")


def test_empty_split(tmp_path):
  _touch(str(tmp_path / "Split-train" / "data.gz"), b"")
  loc = splits.ExamplesLocation(str(tmp_path), ["train"])
  with pytest.raises(splits.SplitError, match="Split 'train' .* is empty"):
    splits.resolve_split([loc], ["train"], role="train_args")


def test_several_artifacts_are_unioned(tmp_path):
  locs = []
  for i in range(2):
    _touch(str(tmp_path / f"a{i}" / "Split-train" / "d.gz"), gzip.compress(b"z"))
    locs.append(splits.ExamplesLocation(str(tmp_path / f"a{i}"), ["train"]))
  files, _ = splits.resolve_split(locs, ["train"], role="train_args")
  assert len(files) == 2
