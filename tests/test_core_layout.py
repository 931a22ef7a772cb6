"""textrecords.datasets.layout, the metadata convention and the location resolver (no TensorFlow)."""

import json
import os

import pytest

from conftest import write_three_datasets
from textrecords.reading import locations as dataset_files
from textrecords.datasets import layout
from textrecords.datasets import metadata
from textrecords.errors import UserError
from textrecords.datasets.layout import DatasetLayout


def test_shard_names_parse_back_at_100000_shards():
  names = layout.shard_names("train.tfrecord", 100000)
  assert names[0] == "train.tfrecord-00000-of-100000"
  assert names[-1] == "train.tfrecord-99999-of-100000"
  assert len(set(names)) == 100000
  parsed = [layout.parse_shard(n) for n in names]
  assert [p.index for p in parsed] == list(range(100000))
  assert {(p.base, p.count) for p in parsed} == {("train.tfrecord", 100000)}
  assert names == sorted(names)  # one width per dataset: name order is shard order
  assert layout.parse_shard("x-123456-of-200000") == ("x", 123456, 200000)
  for not_a_shard in ("x", "x-0001-of-00002", "x-00002-of-00002", "x-00000-of-0002"):
    assert layout.parse_shard(not_a_shard) is None
  assert layout.shard_names("x", 1) == ["x"]


def test_layouts_name_every_path():
  d = DatasetLayout.for_dir("out/mt")
  assert d.meta_path == "out/mt/meta.json" and d.location == "out/mt"
  assert d.record_paths("valid", 1) == ["out/mt/valid.tfrecord"]
  assert d.record_names("train", 2) == ["train.tfrecord-00000-of-00002",
                                        "train.tfrecord-00001-of-00002"]
  assert d.path("vocab.txt") == "out/mt/vocab.txt"
  assert d.index_path("train.tfrecord") == "out/mt/train.tfrecord.index"
  f = DatasetLayout.for_file("out/train.tfrecord")
  assert f.meta_path == "out/train.tfrecord.meta.json" and f.location == "out/train.tfrecord"
  assert f.record_paths(num_shards=3)[2] == "out/train.tfrecord-00002-of-00003"
  with pytest.raises(ValueError):
    f.record_names("valid")
  for lay in (d, f, DatasetLayout.for_dir("out/mt/"), DatasetLayout.for_file("t.tfrecord")):
    assert DatasetLayout.from_meta_path(lay.meta_path) == lay


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
  return write_three_datasets(tmp_path_factory.mktemp("three"))


def _meta_of(location):
  lay = (DatasetLayout.for_dir(location) if os.path.isdir(location)
         else DatasetLayout.for_file(location))
  return lay, json.load(open(lay.meta_path))


def test_one_metadata_convention_for_three_packages(datasets):
  splits = {"bert_data": ["train"], "w2v_data": ["train"], "mt_data": ["train", "valid"]}
  for package, location in datasets.items():
    lay, meta = _meta_of(location)
    assert meta["format"] == metadata.FORMAT == "textrecords/2"
    assert meta["package"] == package
    assert sorted(meta["splits"]) == splits[package]
    on_disk = sorted(n for n in os.listdir(lay.root) if not n.startswith("."))
    assert sorted(f["name"] for f in meta["files"]) == sorted(
        n for n in on_disk if not layout.is_metadata_name(n))
    for split, info in meta["splits"].items():
      assert info["files"] == lay.record_names(split, 2)
      listed = [f for f in meta["files"] if f.get("split") == split]
      assert [f["name"] for f in listed] == info["files"]
      assert {f["role"] for f in listed} == {"records"}
      assert info["num_records"] == sum(f["records"] for f in listed) > 0
    others = {f["role"] for f in meta["files"] if "split" not in f}
    assert others <= {"vocab", "tokenizer", "index"}
    indexes = {f["name"] for f in meta["files"] if f["role"] == "index"}
    assert indexes == {layout.index_name(f["name"]) for f in meta["files"]
                       if f.get("split") and f["records"]}
    assert ("vocab" in others) == (package != "bert_data")
    for f in meta["files"]:
      assert set(f) >= {"name", "bytes", "sha256", "records", "role"}


@pytest.mark.parametrize("package", ["bert_data", "w2v_data", "mt_data"])
def test_every_location_form_resolves_to_the_dataset(datasets, package):
  location = datasets[package]
  lay, _ = _meta_of(location)
  forms = [location, lay.meta_path, lay.path("*.tfrecord-*"),
           lay.record_paths("train", 2)[1]]
  if package == "bert_data":
    forms.append(os.path.dirname(location))  # the folder holding the one output
  for form in forms:
    (found,) = dataset_files.find(form)
    assert found.layout == lay and found.meta["package"] == package, form
  (one,) = dataset_files.find(lay.record_paths("train", 2)[1])
  assert one.names == [lay.record_names("train", 2)[1]]


@pytest.mark.parametrize("reader", ["bert_data", "w2v_data", "mt_data"])
def test_other_package_refused_naming_its_reader(datasets, reader):
  for package, location in datasets.items():
    if package == reader:
      continue
    lay, _ = _meta_of(location)
    for form in (location, lay.meta_path, lay.path("*.tfrecord-*")):
      with pytest.raises(UserError) as e:
        dataset_files.open_datasets(form, reader)
      article = "an" if package == "mt_data" else "a"
      assert str(e.value) == (f"{form}: {article} {package} dataset; read it with "
                              f"{package}.make_dataset")


def test_100000_shard_output_found_from_a_shard(tmp_path):
  lay = DatasetLayout.for_file(str(tmp_path / "x.tfrecord"))
  names = lay.record_names(num_shards=100000)
  meta = metadata.base_meta("bert_data")
  infos = [{"name": n, "bytes": 0, "sha256": "", "records": 0} for n in names]
  metadata.write(lay.meta_path, metadata.set_files(meta, infos, {"train": names}))
  open(lay.path(names[42]), "wb").close()
  (found,) = dataset_files.find(lay.path(names[42]))
  assert found.layout == lay and found.names == [names[42]]
  files = dataset_files.record_files([found], verify="size")
  assert [f.path for f in files] == [lay.path(names[42])]


def test_format_1_metadata_is_read_and_newer_refused(datasets, tmp_path):
  for package, location in datasets.items():
    lay, meta = _meta_of(location)
    old = dict(meta, format="textrecords/1")
    old["files"] = [{k: v for k, v in f.items() if k not in ("role", "split")}
                    for f in meta["files"]]
    if package == "w2v_data":      # format 1: a top-level list of record files
      old["record_files"] = meta["splits"]["train"]["files"]
      del old["splits"]
    elif package == "bert_data":   # format 1: every listed file is a record file
      del old["splits"]
    else:                          # format 1: splits with files and pairs
      old["splits"] = {s: {"pairs": v["num_records"], "files": v["files"]}
                       for s, v in meta["splits"].items()}
    path = str(tmp_path / f"{package}.meta.json")
    metadata.write(path, old)
    got = metadata.read(path, package)
    assert got["splits"].keys() == meta["splits"].keys()
    for s in meta["splits"]:
      assert got["splits"][s]["files"] == meta["splits"][s]["files"]
      assert got["splits"][s]["num_records"] == meta["splits"][s]["num_records"]
    assert [(f["name"], f["role"]) for f in got["files"]] == [
        (f["name"], f["role"]) for f in meta["files"]]
  newer = f"{metadata.FORMAT_PREFIX}{metadata.SEGMENTED_FORMAT_VERSION + 1}"  # past every readable one
  assert newer not in metadata.READABLE_FORMATS
  metadata.write(path, dict(meta, format=newer, version="9.0"))
  with pytest.raises(UserError, match=f"format '{newer}' written by textrecords 9.0.*"
                     "upgrade textrecords or rerun create"):
    metadata.read(path)


def test_location_errors_are_one_line(tmp_path):
  for location, match in ((str(tmp_path / "nope"), "nope not found"),
                          (str(tmp_path / "nope-*"), "no file matches"),
                          (str(tmp_path), "meta.json not found")):
    with pytest.raises(UserError, match=match) as e:
      dataset_files.open_datasets(location, "w2v_data")
    assert "\n" not in str(e.value)
  plain = tmp_path / "plain.tfrecord"
  plain.write_bytes(b"")
  (found,) = dataset_files.find(str(plain))
  assert found.meta is None and found.names == [str(plain)]
  with pytest.raises(UserError, match="plain.tfrecord: no metadata beside it"):
    dataset_files.open_datasets(str(plain), "bert_data")


def test_layout_and_metadata_import_no_tensorflow():
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  code = ("import sys; from textrecords.datasets import layout, metadata; from textrecords.reading import locations as dataset_files, read_options; "
          "assert 'tensorflow' not in sys.modules")
  assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_mt_codecs_from_any_location(datasets):
  from mt_data import vocab as mt_vocab  # pylint: disable=import-outside-toplevel
  loc = datasets["mt_data"]
  src, tgt = mt_vocab.load_codecs(loc)
  for form in (os.path.join(loc, "meta.json"), os.path.join(loc, "valid.tfrecord-*")):
    s2, t2 = mt_vocab.load_codecs(form)
    assert s2.encode("go .") == src.encode("go .") and t2.decode([4, 5]) == tgt.decode([4, 5])
  with pytest.raises(UserError, match="a w2v_data dataset; read it with w2v_data"):
    mt_vocab.load_codecs(datasets["w2v_data"])


def test_readme_layout_table_names_the_files_and_roles_of_the_code():
  """The "Datasets on disk" table (docs/reading.md, moved from the README) lists
  every name the packages write and every metadata role (it was missing
  docs.txt and the index conditions)."""
  from mt_data import schema as mt_schema  # pylint: disable=import-outside-toplevel
  from w2v_data import schema as w2v_schema  # pylint: disable=import-outside-toplevel
  readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "docs", "reading.md"), encoding="utf-8").read()
  table = readme[readme.index("## Datasets on disk"):readme.index("Shard numbers have")]
  lay_dir, lay_file = DatasetLayout.for_dir("out/d"), DatasetLayout.for_file("out/train.tfrecord")
  paths = [lay_dir.meta_path, lay_file.meta_path, *lay_dir.record_paths("S", 1),
           *lay_file.record_paths(num_shards=1),
           *(lay_dir.path(n) for n in (w2v_schema.VOCAB_NAME, w2v_schema.DOCS_NAME,
                                       *mt_schema.VOCAB_FILE.values(),
                                       *mt_schema.TOKENIZER_FILE.values()))]
  for path in paths:
    assert f"`{path}`" in table, path
  assert f"`F{layout.INDEX_SUFFIX}`" in table
  roles = [v for k, v in vars(metadata).items() if k.startswith("ROLE_")]
  assert len(roles) == 4
  for role in roles:
    assert f"role `{role}`" in table or f"`{role}`" in table, role
