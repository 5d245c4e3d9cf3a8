"""Parquet node, edge and seed tables (gnn_trainer_component/graph/tables.py).

Fast unit tests: a graph written as Parquet reads to the arrays of the same graph
written as CSV (scalar features) or TFRecord (vector features), and a bad
Parquet table gets the error class CSV's gets, naming the file, row, column or
feature and id. The Beam engines refuse Parquet before any Beam work.
"""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import table_formats
from gnn_trainer_component.graph import tables
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import store as store_lib

SCHEMA = """
node_sets { key: "user" value {
  features { key: "#id" value { dtype: DT_STRING } }
  features { key: "age" value { dtype: DT_INT32 } }
  features { key: "score" value { dtype: DT_FLOAT } }
  features { key: "name" value { dtype: DT_STRING } }
  metadata { filename: "users.EXT" } } }
node_sets { key: "item" value {
  features { key: "price" value { dtype: DT_FLOAT } }
  metadata { filename: "items.EXT" } } }
edge_sets { key: "rated" value { source: "user" target: "item"
  features { key: "stars" value { dtype: DT_INT64 } }
  features { key: "weight" value { dtype: DT_FLOAT } }
  metadata { filename: "rated.EXT" } } }
"""

USERS = {"id": [10, 11, 12], "age": [30, -4, 7], "score": [0.5, 1.25, 3.0],
         "name": ["ann", "", "cy"]}
ITEMS = {"id": ["i0", "i1"], "price": [1.0, 2.5]}
RATED = {"source": [10, 11, 12, 10], "target": ["i0", "i1", "i1", "i1"],
         "stars": [5, 3, 4, 1], "weight": [0.25, 1.0, 0.5, 2.0]}


def _schema(ext):
  return tfgnn.parse_schema(SCHEMA.replace("EXT", ext))


def _write_csv(path, columns):
  pd.DataFrame(columns).to_csv(path, index=False)


def _write_parquet(path, columns, types=None):
  types = types or {}
  pq.write_table(pa.table({k: pa.array(v, types.get(k)) for k, v in columns.items()}), path)


#: The Arrow types of the Parquet graph: ints narrower or wider than the features.
TYPES = {"age": pa.int64(), "score": pa.float64(), "stars": pa.int32(), "weight": pa.float32()}


def _graph(tmp_path, ext, users=USERS, items=ITEMS, rated=RATED, types=TYPES):
  for name, columns in (("users", users), ("items", items), ("rated", rated)):
    if ext == "csv":
      _write_csv(tmp_path / f"{name}.csv", columns)
    else:
      _write_parquet(tmp_path / f"{name}.parquet", columns, types)
  return _schema(ext)


def _read(tmp_path, ext, **kwargs):
  return tables.read_graph_tables(_graph(tmp_path, ext, **kwargs), str(tmp_path), "Test")


def _error(tmp_path, ext, **kwargs) -> str:
  with pytest.raises(GraphInputError) as e:
    _read(tmp_path, ext, **kwargs)
  return str(e.value)


def test_parquet_reads_to_the_arrays_of_the_same_graph_as_csv(tmp_path):
  (tmp_path / "csv").mkdir()
  (tmp_path / "pq").mkdir()
  csv_nodes, csv_edges = _read(tmp_path / "csv", "csv")
  pq_nodes, pq_edges = _read(tmp_path / "pq", "parquet")
  for name in ("user", "item"):
    assert list(graph_ids.id_bytes(pq_nodes[name].ids)) == list(csv_nodes[name].ids)
    assert sorted(pq_nodes[name].features) == sorted(csv_nodes[name].features)
    for feature, value in csv_nodes[name].features.items():
      assert pq_nodes[name].features[feature].dtype == value.dtype
      np.testing.assert_array_equal(pq_nodes[name].features[feature], value)
  # Integer ids stay int64; their decimal text is the CSV's id.
  assert pq_nodes["user"].ids.dtype == np.int64 and list(pq_nodes["user"].ids) == [10, 11, 12]
  assert pq_nodes["user"].features["name"].tolist() == [b"ann", b"", b"cy"]
  # A declared #id is the node's id as text, from the id column, whatever its type.
  assert pq_nodes["user"].features["#id"].tolist() == [b"10", b"11", b"12"]
  assert pq_nodes["user"].features["age"].dtype == np.int32
  for attr in ("source", "target"):
    np.testing.assert_array_equal(getattr(pq_edges["rated"], attr),
                                  getattr(csv_edges["rated"], attr))
  assert pq_edges["rated"].target.tolist() == [0, 1, 1, 1]
  for feature, value in csv_edges["rated"].features.items():
    assert pq_edges["rated"].features[feature].dtype == value.dtype
    np.testing.assert_array_equal(pq_edges["rated"].features[feature], value)


def test_a_node_id_feature_must_be_a_scalar_string(tmp_path):
  schema = _graph(tmp_path, "csv")
  schema.node_sets["user"].features["#id"].dtype = tf.int64.as_datatype_enum
  with pytest.raises(GraphInputError, match=r"node set 'user' \(table 'users.csv'\) declares "
                     r"the feature '#id' as int64 .*declare it as a scalar string"):
    tables.read_graph_tables(schema, str(tmp_path), "Test")


def test_hash_key_names_dictionary_columns_and_sharded_tables(tmp_path, monkeypatch):
  monkeypatch.setattr(table_formats, "CHUNK_ROWS", 2)
  schema = tfgnn.parse_schema(SCHEMA.replace("EXT", "parquet").replace(
      "rated.parquet", "rated-*-of-00002.parquet"))
  _write_parquet(tmp_path / "users.parquet", {"#id": ["10", "11", "12"], **{
      k: v for k, v in USERS.items() if k != "id"}}, TYPES)
  pq.write_table(pa.table({"id": pa.array(ITEMS["id"]).dictionary_encode(),
                           "price": pa.array(ITEMS["price"], pa.float32())}),
                 tmp_path / "items.parquet")
  for shard, rows in ((0, slice(0, 3)), (1, slice(3, 4))):
    _write_parquet(tmp_path / f"rated-0000{shard}-of-00002.parquet",
                   {("#" + k if k in ("source", "target") else k): v[rows]
                    for k, v in RATED.items()}, TYPES)
  nodes, edges = tables.read_graph_tables(schema, str(tmp_path), "Test")
  assert list(nodes["user"].ids) == [b"10", b"11", b"12"]
  assert list(nodes["item"].ids) == [b"i0", b"i1"]
  assert edges["rated"].source.tolist() == [0, 1, 2, 0]
  assert edges["rated"].features["stars"].tolist() == [5, 3, 4, 1]
  _write_parquet(tmp_path / "rated-00001-of-00002.parquet",
                 {"#source": [10, 11], "#target": ["i0", "i9"], "stars": [1, 1],
                  "weight": [1.0, 1.0]}, TYPES)
  with pytest.raises(GraphInputError, match=r"has target ids not in node set 'item': \['i9'\] "
                                            r"\(first at .*rated-00001-of-00002.parquet, row 2;"):
    tables.read_graph_tables(schema, str(tmp_path), "Test")


VECTOR_SCHEMA = """
node_sets { key: "v" value {
  features { key: "emb" value { dtype: DT_FLOAT shape { dim { size: 3 } } } }
  features { key: "tok" value { dtype: DT_INT64 shape { dim { size: 2 } } } }
  features { key: "grid" value { dtype: DT_FLOAT shape { dim { size: 2 } dim { size: 2 } } } }
  features { key: "tags" value { dtype: DT_STRING shape { dim { size: 2 } } } }
  metadata { filename: "v.EXT" } } }
"""
EMB = [[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]]
TOK = [[1, 2], [3, 4]]
GRID = [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]
TAGS = [["a", "b"], ["c", "d"]]


def _vectors(tmp_path, emb=EMB, tok=TOK, grid=GRID, tags=TAGS, emb_type=None):
  pq.write_table(pa.table({
      "id": ["v0", "v1"], "emb": pa.array(emb, emb_type or pa.list_(pa.float32())),
      "tok": pa.array(tok, pa.list_(pa.int64(), 2)),
      "grid": pa.array(grid, pa.list_(pa.list_(pa.float64()))),
      "tags": pa.array(tags, pa.list_(pa.string()))}), tmp_path / "v.parquet")
  schema = tfgnn.parse_schema(VECTOR_SCHEMA.replace("EXT", "parquet"))
  return tables.read_node_table("v", schema.node_sets["v"], str(tmp_path), "Test")


def test_vector_features_read_as_list_columns_as_tfrecord_reads_them(tmp_path):
  with tf.io.TFRecordWriter(str(tmp_path / "v.tfrecord")) as writer:
    for i in range(2):
      ex = tf.train.Example()
      ex.features.feature["#id"].bytes_list.value.append(f"v{i}".encode())
      ex.features.feature["emb"].float_list.value.extend(EMB[i])
      ex.features.feature["tok"].int64_list.value.extend(TOK[i])
      ex.features.feature["grid"].float_list.value.extend(np.ravel(GRID[i]).tolist())
      ex.features.feature["tags"].bytes_list.value.extend(t.encode() for t in TAGS[i])
      writer.write(ex.SerializeToString())
  schema = tfgnn.parse_schema(VECTOR_SCHEMA.replace("EXT", "tfrecord"))
  want = tables.read_node_table("v", schema.node_sets["v"], str(tmp_path), "Test")
  got = _vectors(tmp_path)
  assert list(got.ids) == list(want.ids)
  for name, value in want.features.items():
    assert got.features[name].dtype == value.dtype and got.features[name].shape == value.shape
    np.testing.assert_array_equal(got.features[name], value)
  assert got.features["grid"].shape == (2, 2, 2)


def test_bad_vectors_name_the_row_and_feature(tmp_path):
  # The class TFRecord gives a vector of the wrong size (CSV holds no vectors).
  with tf.io.TFRecordWriter(str(tmp_path / "v.tfrecord")) as writer:
    ex = tf.train.Example()
    ex.features.feature["#id"].bytes_list.value.append(b"v0")
    ex.features.feature["emb"].float_list.value.extend([1.0, 2.0])
    writer.write(ex.SerializeToString())
  schema = tfgnn.parse_schema(VECTOR_SCHEMA.replace("EXT", "tfrecord"))
  with pytest.raises(GraphInputError, match=r"v.tfrecord, record 1"):
    tables.read_node_table("v", schema.node_sets["v"], str(tmp_path), "Test")
  for kwargs, match in (
      (dict(emb=[[0.5, 1.0, 1.5], [2.0, 2.5]]),
       r"v.parquet, row 2 \(id 'v1'\): feature 'emb' has 2 values, not the 3 of its shape \[3\]"),
      (dict(emb=[[0.5, 1.0, 1.5], None]), r"row 2 \(id 'v1'\): feature 'emb' is missing"),
      (dict(emb=[[0.5, None, 1.5], [2.0, 2.5, 3.0]]),
       r"row 1 \(id 'v0'\): feature 'emb' has a missing value"),
      (dict(emb=[[0.5, 1.0, 1.5], [2.0, float("nan"), 3.0]]),
       r"row 2 \(id 'v1'\): feature 'emb' has a non-finite value \(NaN or inf\)"),
      (dict(grid=[[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0]]]),
       r"row 2 \(id 'v1'\): feature 'grid' has 1 values in list \[1\], not the 2 of its shape"),
      (dict(emb=[[1, 2, 3], [4, 5, 6]], emb_type=pa.list_(pa.string())),
       r"v.parquet: column 'emb' has type list<(item|element): string>, which feature 'emb' "
       r"\(dtype "
       r"float32, shape \[3\]\) does not read: write it as a list column of 3 values per row"),
      (dict(emb=[[1.0, 2.0], [3.0, 4.0]], emb_type=pa.list_(pa.float32(), 2)),
       r"column 'emb' has type fixed_size_list<(item|element): float>\[2\], lists of 2 values, but "
       r"feature 'emb' has shape \[3\]"),
      (dict(emb=[1.0, 2.0], emb_type=pa.float32()),
       r"column 'emb' has type float, which feature 'emb' .* does not read")):
    if kwargs.get("emb_type") == pa.list_(pa.string()):
      kwargs["emb"] = [["1", "2", "3"], ["4", "5", "6"]]
    with pytest.raises(GraphInputError, match=match):
      _vectors(tmp_path, **kwargs)


def _both(tmp_path, change):
  """The errors of the CSV and the Parquet graph after ``change(name -> columns)``."""
  out = {}
  for ext in ("csv", "parquet"):
    folder = tmp_path / ext
    folder.mkdir()
    columns = {"users": dict(USERS), "items": dict(ITEMS), "rated": dict(RATED)}
    change(columns, ext)
    out[ext] = _error(folder, ext, users=columns["users"], items=columns["items"],
                      rated=columns["rated"])
  return out


@pytest.mark.parametrize("case", ["missing column", "missing value", "nan", "inf",
                                  "out of range", "unknown id", "duplicate id", "empty id"])
def test_a_bad_parquet_table_gets_csvs_error(tmp_path, case):
  def change(columns, ext):
    users, rated = columns["users"], columns["rated"]
    if case == "missing column":
      del users["age"]
    elif case == "missing value":
      users["age"] = [30, "" if ext == "csv" else None, 7]
    elif case in ("nan", "inf"):
      users["score"] = [0.5, float(case), 3.0]
    elif case == "out of range":
      users["age"] = [30, 2**31, 7]
    elif case == "unknown id":
      rated["target"] = ["i0", "i1", "i1", "i9"]
    elif case == "duplicate id":
      users["id"] = [10, 11, 11]
    elif case == "empty id":
      users["id"] = ["10", "", "12"]
  errors = _both(tmp_path, change)
  where = {"csv": "line 3", "parquet": "row 2"}
  for ext, message in errors.items():
    assert message.startswith("Test: ")
    if case == "missing column":
      assert f"users.{ext} lacks column(s) ['age']" in message
    elif case == "missing value":
      assert f"users.{ext}, {where[ext]} (id '11'): feature 'age' is missing" in message
    elif case in ("nan", "inf"):
      assert f"users.{ext}, {where[ext]} (id '11'): feature 'score'" in message
      assert "finite" in message
    elif case == "out of range":
      assert f"users.{ext}, {where[ext]} (id '11'): feature 'age' is out of the range of " \
             "int32" in message
    elif case == "unknown id":
      unit = {"csv": "line 5", "parquet": "row 4"}[ext]
      assert (f"edge table 'rated.{ext}' of edge set 'rated' has target ids not in node set "
              f"'item': ['i9'] (first at ") in message and f"rated.{ext}, {unit};" in message
    elif case == "duplicate id":
      unit = {"csv": "line 4", "parquet": "row 3"}[ext]
      assert (f"node table 'users.{ext}' of node set 'user' has duplicate ids ['11'] (first "
              f"repeat: ") in message and f"users.{ext}, {unit})" in message
    elif case == "empty id":
      assert f"users.{ext}, {where[ext]}: 'id' is empty" in message


def test_parquet_column_types_a_feature_does_not_read_are_refused(tmp_path):
  # CSV refuses the values ("is not an integer"); Parquet the column's type, before any row.
  for ext, value in (("csv", "1.5"), ("parquet", 1.5)):
    folder = tmp_path / ext
    folder.mkdir()
    message = _error(folder, ext, users=dict(USERS, age=[30, value, 7]),
                     types=dict(TYPES, age=pa.float64()))
    assert "feature 'age'" in message or "column 'age'" in message
  assert ("Test: Parquet table " in message and "users.parquet: column 'age' has type double, "
          "which feature 'age' (dtype int32) does not read: write it as a column of an integer "
          "type" in message)
  for columns, types, match in (
      (dict(USERS, score=["a", "b", "c"]), dict(TYPES, score=pa.string()),
       r"column 'score' has type string, which feature 'score' \(dtype float32\) does not "
       r"read: write it as a column of an integer or a float type"),
      (dict(USERS, name=[1, 2, 3]), dict(TYPES, name=pa.int64()),
       r"column 'name' has type int64, which feature 'name' \(dtype string\) does not read")):
    with pytest.raises(GraphInputError, match=match):
      _read(tmp_path / "parquet", "parquet", users=columns, types=types)
  _write_parquet(tmp_path / "seeds.parquet", {"id": [1.0, 2.0]})
  with pytest.raises(GraphInputError, match=r"seeds.parquet: column 'id' has type double; id ids "
                                            "are string, binary or integer columns"):
    tables.read_ids(str(tmp_path), "seeds.parquet", "Test")
  # An integer column reads into a float feature, a narrower one into a wider integer.
  nodes, _ = _read(tmp_path / "parquet", "parquet", users=dict(USERS, score=[1, 2, 3]),
                   types=dict(TYPES, score=pa.int8(), age=pa.int16()))
  assert nodes["user"].features["score"].tolist() == [1.0, 2.0, 3.0]
  assert nodes["user"].features["score"].dtype == np.float32
  # A float64 too large for float32 is out of its range, as in CSV.
  with pytest.raises(GraphInputError, match=r"row 2 \(id '11'\): feature 'score' is out of the "
                                            r"range of float32"):
    _read(tmp_path / "parquet", "parquet", users=dict(USERS, score=[1.0, 1e300, 3.0]))


def test_null_ids_and_files_that_are_not_parquet(tmp_path):
  with pytest.raises(GraphInputError, match=r"users.parquet, row 2: 'id' is missing \(null\)"):
    _read(tmp_path, "parquet", users=dict(USERS, id=["10", None, "12"]))
  (tmp_path / "items.parquet").write_text("id,price\ni0,1\n")
  with pytest.raises(GraphInputError, match=r"Test: Parquet table .*items.parquet does not read "
                                            "as Parquet"):
    tables.read_graph_tables(_schema("parquet"), str(tmp_path), "Test")


def test_seed_tables_formats_and_the_memory_estimate(tmp_path):
  schema = _graph(tmp_path, "parquet")
  nodes, _ = tables.read_graph_tables(schema, str(tmp_path), "Test")
  _write_parquet(tmp_path / "seeds.parquet", {"id": [12, 10], "time": [5, 6]})
  assert tables.read_seeds(str(tmp_path), "seeds.parquet", nodes["user"], "user", "train",
                           "Test").tolist() == [2, 0]
  assert tables.read_seed_times(str(tmp_path), "seeds.parquet", "train", np.dtype(np.int64),
                                "Test").tolist() == [5, 6]
  _write_parquet(tmp_path / "dup.parquet", {"id": [12, 12]})
  with pytest.raises(GraphInputError, match=r"seed table 'dup.parquet' has duplicate ids"):
    tables.read_seeds(str(tmp_path), "dup.parquet", nodes["user"], "user", "train", "Test")
  assert [table_formats.table_format(n) for n in ("a.csv", "a-*-of-00004.csv", "a.tfrecord",
                                                  "a.tfrecord@4", "a.parquet", "a-*.parquet",
                                                  "a.parquet@2", "a_parquet")] == [
      "csv", "csv", "tfrecord", "tfrecord", "parquet", "parquet", "parquet",
      "parquet"]
  with pytest.raises(GraphInputError, match=r"Test: cannot tell the format of table 'a.json'"):
    table_formats.table_format("a.json", "Test")
  on_disk, peak = store_lib.load_estimate(schema, str(tmp_path), who="Test")
  # Each node table's ids on top: 3 integer user ids, 2 string item ids and their text.
  ids = 3 * store_lib.PARQUET_ID_BYTES["int"] + 2 * store_lib.PARQUET_ID_BYTES["bytes"]
  text = peak - on_disk * store_lib.LOAD_PEAK_PER_TABLE_BYTE["parquet"] - ids
  assert 4 <= text < 200


INT_SCHEMA = """
node_sets { key: "v" value { metadata { filename: "v.NODES" } } }
edge_sets { key: "e" value { source: "v" target: "v" metadata { filename: "e.EDGES" } } }
"""


def _int_graph(tmp_path, node_ids, source, target, nodes="parquet", edges="parquet"):
  """A graph of one node set ``v`` and one edge set ``e``, read; the tables' formats as given."""
  for name, columns, ext in (("v", {"id": node_ids}, nodes),
                             ("e", {"source": source, "target": target}, edges)):
    if ext == "csv":
      _write_csv(tmp_path / f"{name}.csv", columns)
    else:
      _write_parquet(tmp_path / f"{name}.parquet", columns)
  schema = tfgnn.parse_schema(INT_SCHEMA.replace("NODES", nodes).replace("EDGES", edges))
  return tables.read_graph_tables(schema, str(tmp_path), "Test")


@pytest.mark.parametrize("node_ids", [
    [0, 1, 2, 3, 4],  # 0..N-1 in order: the id is the row
    [3, 0, 4, 1, 2],  # a permutation: a dense table
    [7, -2, 10**15, 5, 2**62],  # sparse: hashed
], ids=["range", "dense", "hashed"])
def test_integer_ids_stay_int64_and_integer_ends_find_their_rows(tmp_path, node_ids):
  source, target = node_ids[::-1] + [node_ids[2]], node_ids + [node_ids[0]]
  nodes, edges = _int_graph(tmp_path, node_ids, source, target)
  ids = nodes["v"].ids
  assert ids.dtype == np.int64 and ids.tolist() == node_ids
  assert edges["e"].source.tolist() == [4, 3, 2, 1, 0, 2]
  assert edges["e"].target.tolist() == [0, 1, 2, 3, 4, 0]
  # Any kind of wanted id: int, its decimal text as bytes or str.
  want = [node_ids[3], str(node_ids[1]).encode(), str(node_ids[4])]
  assert graph_ids.lookup(ids, want, "Test", "v", "v.parquet").tolist() == [3, 1, 4]
  assert graph_ids.lookup(ids, np.asarray(node_ids[::-1]), "Test", "v", "v.parquet").tolist() == [
      4, 3, 2, 1, 0]
  # An integer end not in the node set: the file, row, column and id, as for text ids.
  with pytest.raises(GraphInputError) as e:
    _int_graph(tmp_path, node_ids, source, target[:4] + [123456789, 123456789])
  assert ("Test: edge table 'e.parquet' of edge set 'e' has target ids not in node set 'v': "
          "['123456789'] (first at ") in str(e.value)
  assert "e.parquet, row 5; 2 such edge(s) in this part of the table" in str(e.value)
  with pytest.raises(GraphInputError) as e:
    _int_graph(tmp_path, node_ids[:-1] + [node_ids[0]], source, target)
  assert (f"node table 'v.parquet' of node set 'v' has duplicate ids ['{node_ids[0]}'] (first "
          "repeat: ") in str(e.value) and "v.parquet, row 5)" in str(e.value)


def test_integer_node_ids_with_text_edges_and_seeds(tmp_path):
  nodes, edges = _int_graph(tmp_path, [10, 11, 12], ["12", "10"], ["11", "11"], edges="csv")
  assert nodes["v"].ids.dtype == np.int64
  assert edges["e"].source.tolist() == [2, 0] and edges["e"].target.tolist() == [1, 1]
  # Text that is not exactly an integer's decimal text is no node of an integer node set.
  for bad in ("012", "+12", "12.0", " 12", "u12", "-0", "99999999999999999999"):
    with pytest.raises(GraphInputError) as e:
      _int_graph(tmp_path, [10, 11, 12], ["12", bad], ["11", "11"], edges="csv")
    assert (f"has source ids not in node set 'v': [{bad!r}] (first at " in str(e.value)
            and "e.csv, line 3;" in str(e.value)), bad
  _write_csv(tmp_path / "seeds.csv", {"id": ["12", "10"]})
  assert tables.read_seeds(str(tmp_path), "seeds.csv", nodes["v"], "v", "train",
                           "Test").tolist() == [2, 0]
  _write_csv(tmp_path / "seeds.csv", {"id": ["12", "13", "010"]})
  with pytest.raises(GraphInputError, match=r"seed table 'seeds.csv': ids missing from the 'v' "
                                            r"node table 'v.parquet': \['010', '13'\]"):
    tables.read_seeds(str(tmp_path), "seeds.csv", nodes["v"], "v", "train", "Test")
  # Parquet seeds as integers, and 19-digit ids at int64's edge.
  big = [2**63 - 1, -2**63, 0]
  nodes, edges = _int_graph(tmp_path, big, [str(i) for i in big], ["0"] * 3, edges="csv")
  assert edges["e"].source.tolist() == [0, 1, 2]
  _write_parquet(tmp_path / "seeds.parquet", {"id": [0, 2**63 - 1]})
  assert tables.read_seeds(str(tmp_path), "seeds.parquet", nodes["v"], "v", "train",
                           "Test").tolist() == [2, 0]


def test_text_node_ids_with_integer_edge_ends(tmp_path):
  nodes, edges = _int_graph(tmp_path, ["10", "x", "012", "11"], [11, 10], [10, 11],
                            nodes="csv")
  assert nodes["v"].ids.dtype == object and nodes["v"].ids.tolist() == [b"10", b"x", b"012",
                                                                        b"11"]
  assert edges["e"].source.tolist() == [3, 0] and edges["e"].target.tolist() == [0, 3]
  # 12 is the text "12", not "012".
  with pytest.raises(GraphInputError, match=r"has target ids not in node set 'v': \['12'\] "
                                            r"\(first at .*e.parquet, row 2;"):
    _int_graph(tmp_path, ["10", "x", "012", "11"], [11, 10], [10, 12], nodes="csv")
  # Some node table files with integer ids, some with text: all ids as bytes.
  schema = tfgnn.parse_schema(INT_SCHEMA.replace("v.NODES", "v-*.parquet").replace(
      "EDGES", "parquet"))
  _write_parquet(tmp_path / "v-0.parquet", {"id": [10, 11]})
  _write_parquet(tmp_path / "v-1.parquet", {"id": ["x"]})
  _write_parquet(tmp_path / "e.parquet", {"source": [11, 10], "target": ["x", "10"]})
  nodes, edges = tables.read_graph_tables(schema, str(tmp_path), "Test")
  assert nodes["v"].ids.tolist() == [b"10", b"11", b"x"]
  assert edges["e"].source.tolist() == [1, 0] and edges["e"].target.tolist() == [2, 0]
  # uint64 ids beyond int64's range read as their text.
  _write_parquet(tmp_path / "v-1.parquet", {"id": [2**64 - 1]}, {"id": pa.uint64()})
  _write_parquet(tmp_path / "e.parquet", {"source": [11], "target": [2**64 - 1]},
                 {"target": pa.uint64()})
  nodes, edges = tables.read_graph_tables(schema, str(tmp_path), "Test")
  assert nodes["v"].ids.tolist() == [b"10", b"11", str(2**64 - 1).encode()]
  assert edges["e"].source.tolist() == [1] and edges["e"].target.tolist() == [2]


def test_integer_ids_are_written_out_as_their_decimal_text(tmp_path):
  from gnn_trainer_component.graph import links  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.model import embeddings_table as table  # pylint: disable=g-import-not-at-top
  ids = pd.Index(np.asarray([12, -3, 100, 9], np.int64))
  assert graph_ids.id_bytes(ids).tolist() == [b"12", b"-3", b"100", b"9"]
  assert graph_ids.id_bytes(ids, [2, 0]).tolist() == [b"100", b"12"]
  # Byte order (ties among neighbours) as of the text: "-3" < "100" < "12" < "9".
  assert graph_ids.byte_order(ids).tolist() == [1, 2, 0, 3]
  # GraphInferrer's table (both engines write through it) gets the text as strings.
  writer = table.Writer(str(tmp_path / "out.parquet"), table.id_type(ids.to_numpy()))
  writer.write(graph_ids.id_bytes(ids, [2, 0]), {"score": np.asarray([0.5, 1.5], np.float32)})
  writer.close()
  assert pq.read_table(tmp_path / "out.parquet").column("id").to_pylist() == ["100", "12"]
  # Link prediction's held-out pairs, by id.
  assert links.pairs_csv(np.asarray([[0, 1]]), np.asarray([[3, 2]]), ids, ids) == (
      "source,target,label\n12,-3,1\n9,100,0\n")


@pytest.mark.parametrize("who, hint", [
    ("GraphSampler", "GnnTrainer(graph_schema=..., seeds=..., sampling_config=...)"),
    ("LinkSampler", "GnnTrainer(graph_schema=..., link_config=...)"),
    ("GraphInferrer", "inference_config={'engine': 'in_memory'}")])
def test_the_beam_engines_refuse_parquet_before_any_beam_work(tmp_path, who, hint):
  (tmp_path / "csv").mkdir()
  schema = _graph(tmp_path / "csv", "csv")
  _write_parquet(tmp_path / "csv" / "seeds.parquet", {"id": [10]})
  with pytest.raises(GraphInputError) as e:
    tables.check_graph(schema, str(tmp_path / "csv"), "user", {"train": "seeds.parquet"}, who)
  assert (f"{who}: the table 'seeds.parquet' of split 'train' is Parquet, which {who}'s Beam "
          "engine does not read") in str(e.value)
  assert "Write the table as CSV or TFRecord" in str(e.value) and hint in str(e.value)
  _write_csv(tmp_path / "csv" / "seeds.csv", {"id": [10]})
  _, _, counts = tables.check_graph(schema, str(tmp_path / "csv"), "user",
                                    {"train": "seeds.csv"}, who)
  assert counts == {"train": 1}
  (tmp_path / "pq").mkdir()
  schema = _graph(tmp_path / "pq", "parquet")
  with pytest.raises(GraphInputError, match=rf"{who}: the table 'items.parquet' of node set "
                                            "'item' is Parquet"):
    tables.check_graph(schema, str(tmp_path / "pq"), None, {}, who)
