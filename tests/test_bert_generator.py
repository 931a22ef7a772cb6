"""bert_data's declared generator (`bert_data/generator.py`), engine-free parts.

Replaces the tests of the Beam-only `chunked_index` (an index laid end to
end from per-chunk pieces, a packing plan made per chunk): the generator's
pass "corpus" joins the units' tokenized lines in unit order, so the corpus,
its packing plan and the records must not depend on where the units are cut.
"""

import dataclasses
import hashlib
import os
import random

import numpy as np
import pytest

from conftest import SAMPLE_TEXT, VOCAB, write_varied_corpus

from bert_data import bucket_rows
from bert_data import generator
from bert_data import instance_packing
from bert_data import packing
from bert_data import units
from bert_data.config import BertConfig
from bert_data.documents import read_corpus
from textrecords.engine import EngineOptions
from textrecords.engine import generator_steps
from textrecords.engine import protocol
from textrecords.engine import record_files
from textrecords.engine import record_runs
from textrecords.errors import UserError
from textrecords.files import tfrecord
from textrecords.runs import generate


@pytest.fixture(autouse=True)
def no_cache_left():
  """Tests here load tokenizers through `generator.tokenizer` outside a
  create: leave no module state to later tests."""
  yield
  generator._CACHE.clear()  # pylint: disable=protected-access


def _config(inputs, out, **kw) -> BertConfig:
  kw = dict(dict(dupe_factor=2, num_workers=1, quiet=True), **kw)
  return BertConfig(input_files=tuple(inputs), output_files=(f"{out}/t.tfrecord",),
                    vocab_file=VOCAB, **kw)


def _corpus_value(gen, unit_bytes, monkeypatch):
  """The pass "corpus" value with units of `unit_bytes`, mapped in a
  shuffled order and merged two by two (as a distributed engine may)."""
  monkeypatch.setattr(generator, "UNIT_BYTES", unit_bytes)
  partials = [generator_steps.map_pass(gen, "corpus", u, {}) for u in gen.units()]
  random.Random(unit_bytes).shuffle(partials)
  while len(partials) > 1:
    partials = [generator_steps.merge_pass(gen, "corpus", partials[i:i + 2])
                for i in range(0, len(partials), 2)]
  return generator_steps.finish_pass(gen, "corpus", partials[0])


def test_corpus_pass_is_the_whole_corpus_wherever_units_are_cut(tmp_path, monkeypatch):
  """Documents and runs of blank lines crossing unit ends, an empty-ish
  second file (documents continue across files), units of 1 byte to 1 MiB:
  the corpus, its --packing plans and the decode counts of one whole read."""
  blanks = tmp_path / "blanks.txt"
  blanks.write_bytes(b"\n\nthe cat sat\n\n\n\na dog ran\nand sat\n\n" * 5
                     + b"bad \xff line\n\n" + b"the end")
  inputs = (write_varied_corpus(tmp_path / "corpus.txt", 2), str(blanks), SAMPLE_TEXT)
  cfg = _config(inputs, tmp_path / "o", on_decode_error="replace")
  tok = generator.tokenizer(cfg)
  whole = read_corpus((units.tokenize_chunk(u.chunk(), tok, "replace")[:2]
                       for u in protocol.units_from_sizes(inputs, 1 << 30)), inputs)
  gen = generator.BertGenerator(cfg, tok, "")
  for unit_bytes in (1, 7, 64, 300, 4096, 1 << 20):
    value = _corpus_value(gen, unit_bytes, monkeypatch)
    got = value["corpus"]
    assert value["units"] == len(gen.units())
    assert value["decode_errors"] == (1, 0), unit_bytes
    for name in ("tokens", "seg_starts", "doc_starts"):
      assert getattr(got, name).tolist() == getattr(whole, name).tolist(), (unit_bytes, name)
    for mode in packing.PACKING_MODES:
      want = packing.pack(whole.seg_starts, whole.doc_starts, 40, mode)
      plan = packing.pack(got.seg_starts, got.doc_starts, 40, mode)
      assert plan.instances.tolist() == want.instances.tolist()


@pytest.mark.parametrize("extra", [{}, dict(packing="doc_sentences", next_sentence=False)])
def test_units_share_the_work_once_and_the_bytes_do_not_see_it(tmp_path, monkeypatch, extra):
  """Each unit makes the instances of its share of the documents (or packed
  instances) in every dupe round, each once; the records and metadata are
  the same for any unit size and worker count."""
  corpus = write_varied_corpus(tmp_path / "corpus.txt", 3)
  cfg = _config([corpus], tmp_path / "o", num_shards=3, **extra)
  gen = generator.BertGenerator(cfg, generator.tokenizer(cfg), "")
  value = _corpus_value(gen, 500, monkeypatch)
  keys = [k for u in gen.units() for ks, _ in gen.keyed_records(u, {"corpus": value})
          for k in ks.tolist()]
  assert len(keys) == len(set(keys)) > 0
  n_units = len(gen.units())
  assert n_units > 5
  digests = []
  for unit_bytes, workers in ((1 << 20, 1), (500, 2), (77, 1)):
    monkeypatch.setattr(generator, "UNIT_BYTES", unit_bytes)
    generator.create(_config([corpus], tmp_path / "o", num_shards=3, num_workers=workers,
                             overwrite=True, **extra))
    digests.append({n: hashlib.sha256(open(tmp_path / "o" / n, "rb").read()).hexdigest()
                    for n in sorted(os.listdir(tmp_path / "o"))})
  assert digests[0] == digests[1] == digests[2]
  assert len(digests[0]) == 3 + 3 + 1  # shards, their indexes, the metadata


def test_records_go_to_the_shard_of_their_key_range(tmp_path, monkeypatch):
  """A record's shard is its order bucket's range ((key * buckets) >> 64,
  buckets / shards a shard): every key of shard i is below every key of
  shard i + 1, and each shard is sorted."""
  corpus = write_varied_corpus(tmp_path / "corpus.txt", 2)
  cfg = _config([corpus], tmp_path / "o", num_shards=4)
  gen = generator.BertGenerator(cfg, generator.tokenizer(cfg), "")
  monkeypatch.setattr(units, "_BUCKET_BYTES", 1 << 10)  # many buckets
  values = {"corpus": _corpus_value(gen, 400, monkeypatch)}
  nb = values["corpus"]["buckets"]
  assert nb > 4 and nb % 4 == 0
  by_shard = {}
  for u in gen.units():
    records, total = gen.examples(u, values)
    assert total == len(records)
    for shard, key, _ in records:
      ukey = key + (1 << 63)
      assert shard == ((ukey * nb) >> 64) // (nb // 4)
      by_shard.setdefault(shard, []).append(key)
  assert sorted(by_shard) == [0, 1, 2, 3]
  for a, b in zip(range(3), range(1, 4)):
    assert max(by_shard[a]) < min(by_shard[b])


def test_engines_refuse_only_the_reference_order():
  """--reference_compatible in one line, naming the flag; the local engine
  takes it; packed rows and several --output_file run anywhere."""
  base = dict(input_files=(SAMPLE_TEXT,), vocab_file=VOCAB)
  cases = [(dict(reference_compatible=True), "^--reference_compatible runs on the local "
                                             "engine only")]
  for kw, message in cases:
    cfg = BertConfig(**dict(dict(base, output_files=("o.tfrecord",)), **kw))
    generator.check_engine(cfg, "local")
    with pytest.raises(Exception, match=message) as e:
      generator.check_engine(cfg, "dask")
    assert "\n" not in str(e.value)
  generator.check_engine(BertConfig(output_files=("o.tfrecord",), **base), "dask")
  generator.check_engine(BertConfig(output_files=("o.tfrecord",), pack_instances=2, **base),
                         "beam")  # rows packed after the sort (`finish_file`)
  generator.check_engine(BertConfig(output_files=("a.tfrecord", "b.tfrecord"), **base),
                         "dask")  # dealt over the datasets (`deals_records`)


def test_shard_of_equals_the_bucket_arithmetic():
  rng = np.random.default_rng(0)
  for nb, ns in ((1, 1), (7, 7), (12, 3), (100, 4)):
    shard_of = generator._ShardOf(nb, ns)  # pylint: disable=protected-access
    keys = np.concatenate([rng.integers(0, 2**63, 2000, dtype=np.uint64) * np.uint64(2),
                           np.array([0, 2**64 - 1], np.uint64), shard_of.starts,
                           shard_of.starts - np.uint64(1)])
    want = [((k * nb) >> 64) // (nb // ns) for k in keys.tolist()]
    assert shard_of(keys).tolist() == want


@pytest.mark.parametrize("extra", [dict(num_shards=3, on_decode_error="replace"),
                                   dict(masking="dynamic", packing="full_sentences",
                                        next_sentence=False, num_shards=2)])
def test_the_core_local_engine_gives_the_bytes_of_the_bucket_order(tmp_path, monkeypatch,
                                                                    extra):
  """`generator.create` orders bert's records in hash buckets on this
  machine (`ordered_run`); the core's local engine running the declaration
  (`runs.generate`, every unit's sorted run merged) writes the same files."""
  corpus = write_varied_corpus(tmp_path / "corpus.txt", 3)
  out = tmp_path / "o"
  cfg = _config([corpus, SAMPLE_TEXT], out, num_workers=2, **extra)
  generator.create(cfg)
  want = {n: open(out / n, "rb").read() for n in sorted(os.listdir(out))}
  monkeypatch.setattr(generator, "UNIT_BYTES", 900)
  cfg = _config([corpus, SAMPLE_TEXT], out, num_workers=2, overwrite=True, **extra)
  gen = generator.BertGenerator(cfg, generator.tokenizer(cfg), _vocab_sha(cfg))
  generate.create(gen, cfg, EngineOptions(), flag="--output_file")
  assert {n: open(out / n, "rb").read() for n in sorted(os.listdir(out))} == want


def _vocab_sha(cfg) -> str:
  return hashlib.sha256(open(cfg.vocab_file, "rb").read()).hexdigest()


def test_packed_rows_of_the_core_local_engine_are_the_bucket_order_rows(tmp_path, monkeypatch):
  """--pack_instances=3 over several order buckets a shard: the core local
  engine packs each bucket of a file's sorted instances after the sort
  (`BertGenerator.finish_file`), the bytes `ordered_run` writes."""
  monkeypatch.setattr(units, "_BUCKET_BYTES", 3000)  # (workers fork: they see it)
  corpus = write_varied_corpus(tmp_path / "corpus.txt", 3)
  out = tmp_path / "o"
  extra = dict(num_shards=2, pack_instances=3, num_workers=2)
  generator.create(_config([corpus, SAMPLE_TEXT], out, **extra))
  want = {n: open(out / n, "rb").read() for n in sorted(os.listdir(out))}
  packed = []
  real_rows = bucket_rows._rows  # pylint: disable=protected-access
  monkeypatch.setattr(bucket_rows, "_rows", lambda *a: packed.append(a[0]) or real_rows(*a))
  monkeypatch.setattr(generator, "UNIT_BYTES", 900)
  cfg = _config([corpus, SAMPLE_TEXT], out, overwrite=True, **extra)
  gen = generator.BertGenerator(cfg, generator.tokenizer(cfg), _vocab_sha(cfg))
  generate.create(gen, cfg, EngineOptions(), flag="--output_file")
  assert {n: open(out / n, "rb").read() for n in sorted(os.listdir(out))} == want
  assert len(packed) > 4 and packed == sorted(packed)  # buckets packed one by one, in order


def test_packed_runs_pack_each_bucket_wherever_the_runs_are_cut():
  """Runs cut anywhere (a bucket over several runs, a run over several
  buckets): the rows of each bucket's instances packed alone."""
  cfg = BertConfig(input_files=(SAMPLE_TEXT,), output_files=("o.tfrecord",), vocab_file=VOCAB,
                   pack_instances=3, max_seq_length=32, max_predictions_per_seq=5)
  packer = units.make_row_packer(cfg)
  rng = np.random.default_rng(0)
  instances = [instance_packing.compact_instance(
      rng.integers(5, 99, n).tolist(), n // 2, bool(n % 2), [1], [7])
      for n in rng.integers(4, 20, 300).tolist()]
  keys = np.sort(rng.integers(-2**63, 2**63 - 1, len(instances), dtype=np.int64))
  bucket_of = generator._BucketOf(8)  # pylint: disable=protected-access
  buckets = bucket_of(keys)
  framed = [tfrecord.frame(x) for x in instances]
  cuts = [0, 1, 40, 41, 150, 299, 300]
  runs = [record_runs.from_keyed(list(zip(keys[a:b].tolist(), framed[a:b])))
          for a, b in zip(cuts, cuts[1:])]
  got = [rec for run in bucket_rows.packed_runs(runs, bucket_of, packer)
         for _, rec in run.records()]
  want = [tfrecord.frame(row) for b in sorted(set(buckets.tolist()))
          for row in packer.pack_records([x for x, y in zip(instances, buckets) if y == b])]
  assert got == want and len(set(buckets.tolist())) == 8
  assert got != [tfrecord.frame(row) for row in packer.pack_records(instances)]


def test_several_output_files_on_the_core_local_engine_are_dealt_as_ordered_run(tmp_path,
                                                                              monkeypatch):
  """Three --output_file datasets (two in one folder, two of one file name):
  the core local engine deals the order buckets' instances over them in
  turn (`deals_records`, `engine.record_files`), the bytes and metadata of
  `ordered_run`'s round-robin."""
  monkeypatch.setattr(units, "_BUCKET_BYTES", 3000)  # (workers fork: they see it)
  corpus = write_varied_corpus(tmp_path / "corpus.txt", 3)

  def config(out):
    return dataclasses.replace(
        _config([corpus, SAMPLE_TEXT], out, num_workers=2),
        output_files=(f"{out}/x/t.tfrecord", f"{out}/y/t.tfrecord", f"{out}/y/u.tfrecord"))
  generator.create(config(tmp_path / "a"))
  monkeypatch.setattr(generator, "UNIT_BYTES", 900)
  cfg = config(tmp_path / "b")
  gen = generator.BertGenerator(cfg, generator.tokenizer(cfg), _vocab_sha(cfg))
  dealt = []
  real_lanes = record_files.lanes
  monkeypatch.setattr(record_files, "lanes", lambda runs, n: dealt.append(n) or real_lanes(runs, n))
  generate.create(gen, cfg, EngineOptions(), flag="--output_file")
  assert _tree(tmp_path / "b") == _tree(tmp_path / "a") and len(_tree(tmp_path / "a")) == 9
  assert len(dealt) > 3 and set(dealt) == {3}  # a group (order bucket) at a time


def _tree(out) -> dict:
  """Every file under `out` (relative path -> bytes, its own path replaced)."""
  got = {}
  for root, _, names in os.walk(out):
    for n in names:
      path = os.path.join(root, n)
      got[os.path.relpath(path, out)] = open(path, "rb").read().replace(str(out).encode(), b"OUT")
  return got


def test_too_few_instances_for_several_output_files_is_the_local_error(tmp_path):
  """Fewer instances than --output_file datasets: the line `ordered_run`
  gives, from the core engine's metadata step too, nothing left."""
  bad = tmp_path / "small.txt"
  bad.write_text("a cat sat on the mat\n" * 4)
  errors = []
  for name in ("ordered", "core"):
    out = tmp_path / name
    cfg = BertConfig(input_files=(str(bad),), vocab_file=VOCAB, quiet=True,
                     output_files=tuple(f"{out}/d{i}/t.tfrecord" for i in range(40)))
    with pytest.raises(UserError) as e:
      if name == "ordered":
        generator.create(cfg)
      else:
        gen = generator.BertGenerator(cfg, generator.tokenizer(cfg), _vocab_sha(cfg))
        generate.create(gen, cfg, EngineOptions(), flag="--output_file")
    errors.append(str(e.value))
    assert not [f for _, _, files in os.walk(out) for f in files if not f.startswith(".")], name
  assert errors[0] == errors[1] and "(or that many --output_file paths)" in errors[0], errors
