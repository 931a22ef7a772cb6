"""bert_data's default mode in bounded partitions (issue 37, "Scale by design").

The input is cut from file sizes alone into partitions of at most
`generator.PARTITION_BYTES`; each is a corpus of its own, so a random next
sentence comes from the same partition. Tested here: the cut never depends
on the unit size, an input of one partition is a whole corpus, every engine
gives the same bytes for an input of several, next sentences stay inside
their partition, and the instances' distributions over many seeds match
those of the whole corpus.
"""

import json
import os
import statistics

import pytest

from conftest import SAMPLE_TEXT, VOCAB, write_varied_corpus
from test_generator_engines import (  # pylint: disable=unused-import
    MULTI, _bad_utf8_file, _bert_digests as _digests, dask_cluster)

from bert_data import generator
from bert_data import units
from bert_data.config import BertConfig
from textrecords.engine import EngineOptions
from textrecords.engine import generator_steps
from textrecords.engine import protocol
from textrecords.files import storage
from textrecords.files import tfrecord
from textrecords.runs import generate
from textrecords.wire.example_decoder import decode_example


@pytest.fixture(autouse=True)
def no_cache_left():
  """Tests here load tokenizers through `generator.tokenizer`: leave no module state."""
  yield
  generator._CACHE.clear()  # pylint: disable=protected-access


def _config(inputs, out, **kw) -> BertConfig:
  kw = dict(dict(dupe_factor=2, num_workers=1, quiet=True), **kw)
  return BertConfig(input_files=tuple(map(str, inputs)), output_files=(f"{out}/t.tfrecord",),
                    vocab_file=VOCAB, **kw)


def _partition_corpora(gen) -> dict:
  """{partition: its corpus's (tokens, seg_starts, doc_starts) as lists},
  the pass run per partition as an engine runs it."""
  merged = {}
  for u in gen.units():
    partial = generator_steps.map_pass(gen, "corpus", u, {})
    merged[u.partition] = generator_steps.merge_pass(gen, "corpus",
                                                     [merged.get(u.partition), partial])
  out = {}
  for p, m in merged.items():
    c = generator_steps.finish_pass(gen, "corpus", m)["corpus"]
    out[p] = (c.tokens.tolist(), c.seg_starts.tolist(), c.doc_starts.tolist())
  return out


def test_partitions_come_from_sizes_whatever_the_unit_size(tmp_path, monkeypatch):
  """Three files (documents crossing files and partition bounds): the
  partitions' corpora are the same for units of 77 bytes to 1 MiB; one
  partition's units are `protocol.units_from_sizes`'s."""
  inputs = [write_varied_corpus(tmp_path / "corpus.txt", 2),
            _bad_utf8_file(tmp_path / "messy.txt", ["a cat sat", "", "a dog sat on a mat"]),
            SAMPLE_TEXT]
  cfg = _config(inputs, tmp_path / "o", on_decode_error="replace")
  tok = generator.tokenizer(cfg)
  total = sum(os.path.getsize(p) for p in inputs)
  monkeypatch.setattr(generator, "PARTITION_BYTES", total // 4)
  gen = generator.BertGenerator(cfg, tok, "")
  assert gen.num_partitions == 5 and gen.passes[0].partitioned
  corpora = []
  for unit_bytes in (77, 1000, 1 << 20):
    monkeypatch.setattr(generator, "UNIT_BYTES", unit_bytes)
    assert [u.index for u in gen.units()] == list(range(len(gen.units())))
    corpora.append(_partition_corpora(gen))
  assert corpora[0] == corpora[1] == corpora[2]
  assert sorted(corpora[0]) == list(range(5))
  monkeypatch.setattr(generator, "PARTITION_BYTES", total)
  whole = generator.BertGenerator(cfg, tok, "")
  assert whole.num_partitions == 1 and not whole.passes[0].partitioned
  assert whole.units() == protocol.units_from_sizes(inputs, 1 << 20)
  ref = generator.BertGenerator(_config(inputs, tmp_path / "r", reference_compatible=True,
                                        on_decode_error="replace"), tok, "")
  monkeypatch.setattr(generator, "PARTITION_BYTES", 100)
  assert ref.num_partitions == 1  # (the reference's one RNG walks the whole corpus)


@pytest.mark.parametrize("kw", [dict(num_shards=3, do_whole_word_mask=True),
                                dict(num_shards=2, packing="full_sentences",
                                     masking="dynamic", next_sentence=False),
                                dict(num_shards=2, pack_instances=3)])
def test_partitioned_input_has_the_same_bytes_on_every_engine(tmp_path, monkeypatch, kw,
                                                              dask_cluster):
  """An input of four partitions (three files): this machine's run
  (`ordered_run`, 2 workers), the core local engine, Beam (2 worker
  processes) and a Dask cluster write the same bytes; not those of the
  whole corpus, and the metadata says so."""
  pytest.importorskip("apache_beam")
  inputs = [write_varied_corpus(tmp_path / "corpus.txt", 3),
            _bad_utf8_file(tmp_path / "messy.txt", ["a cat sat", "", "a dog sat on a mat"]),
            SAMPLE_TEXT]
  kw = dict(kw, on_decode_error="replace")
  generator.create(_config(inputs, tmp_path / "whole", **kw))
  monkeypatch.setattr(generator, "PARTITION_BYTES",
                      sum(os.path.getsize(p) for p in inputs) // 4 + 1)
  generator.create(_config(inputs, tmp_path / "local", num_workers=2, **kw))
  local = _digests(tmp_path / "local")
  assert local != _digests(tmp_path / "whole")
  meta = json.load(open(tmp_path / "local" / "t.tfrecord.meta.json"))
  whole_meta = json.load(open(tmp_path / "whole" / "t.tfrecord.meta.json"))
  assert meta["partitions"] == {"count": 4, "partition_bytes": generator.PARTITION_BYTES}
  assert "partitions" not in whole_meta
  assert meta["counts"]["tokens"] == whole_meta["counts"]["tokens"]
  assert meta["counts"]["replaced_lines"] == whole_meta["counts"]["replaced_lines"] > 0
  assert whole_meta["counts"]["documents"] < meta["counts"]["documents"] \
      <= whole_meta["counts"]["documents"] + 3  # (documents cut at the bounds)
  engines = [("core", None), ("beam", EngineOptions("beam", MULTI)),
             ("dask", EngineOptions("dask", dask_scheduler=dask_cluster))]
  for name, engine in engines:
    monkeypatch.setattr(generator, "UNIT_BYTES", 600)
    cfg = _config(inputs, tmp_path / name, **kw)
    if engine is None:  # the core local engine runs the declaration as declared
      gen = generator.BertGenerator(cfg, generator.tokenizer(cfg), storage.sha256(VOCAB))
      generate.create(gen, cfg, EngineOptions(), flag="--output_file")
    else:
      generator.create(cfg, engine)
    assert _digests(tmp_path / name) == local, name


def _two_vocabularies(path, docs_per_half: int = 120) -> tuple:
  """A file whose first half's documents use words of one set and the
  second half's of another, the halves of equal bytes; returns (path, the
  two sets)."""
  first = ["cat", "dog", "horse", "cow", "bird", "fish", "mouse", "lion"]
  second = ["red", "blue", "green", "yellow", "black", "white", "orange", "purple"]
  halves = []
  for words in (first, second):
    docs = []
    for d in range(docs_per_half):
      lines = [" ".join(words[(d * 7 + s * 3 + k) % 8] for k in range(6 + (d + s) % 7))
               for s in range(2 + d % 4)]
      docs.append("\n".join(lines))
    halves.append("\n\n".join(docs) + "\n\n")
  n = max(len(h) for h in halves)
  halves = [h + "\n" * (n - len(h)) for h in halves]  # (blank lines: no text)
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(halves))
  return str(path), (set(first), set(second))


def _token_sets(out, vocab) -> list:
  """Each record's set of words (--masking=dynamic: unmasked ids)."""
  words = open(vocab, encoding="utf-8").read().split("\n")
  got = []
  for n in sorted(os.listdir(out)):
    if n.endswith(".tfrecord") or ".tfrecord-" in n:
      for rec in tfrecord.read_records(os.path.join(out, n)):
        ex = decode_example(rec)
        got.append(({words[i] for i in ex["input_ids"] if i} - {"[CLS]", "[SEP]"},
                    ex["next_sentence_labels"][0]))
  return got


def test_random_next_sentences_come_from_the_same_partition(tmp_path, monkeypatch):
  """Two partitions of disjoint words: every instance's words (its random
  next sentence's too) come from one partition; with one partition, some
  random next sentences cross over (the check can see a crossing)."""
  path, (first, second) = _two_vocabularies(tmp_path / "two.txt")
  kw = dict(masking="dynamic", dupe_factor=3, short_seq_prob=0.5)
  generator.create(_config([path], tmp_path / "whole", **kw))
  crossed = [w for w, _ in _token_sets(tmp_path / "whole", VOCAB) if w & first and w & second]
  assert crossed
  monkeypatch.setattr(generator, "PARTITION_BYTES", os.path.getsize(path) // 2)
  generator.create(_config([path], tmp_path / "parts", **kw))
  got = _token_sets(tmp_path / "parts", VOCAB)
  assert sum(1 for _, random_next in got if random_next) > len(got) // 5
  assert all(w <= first or w <= second for w, _ in got)
  assert sum(1 for w, _ in got if w <= first) > len(got) // 3
  assert sum(1 for w, _ in got if w <= second) > len(got) // 3


def _stats(out) -> dict:
  """Instances, mean tokens, mean masked positions, random-next share of a run."""
  lengths, masks, random_next = [], [], []
  for n in sorted(os.listdir(out)):
    if ".tfrecord" in n and not n.endswith((".json", ".index")):
      for rec in tfrecord.read_records(os.path.join(out, n)):
        ex = decode_example(rec)
        lengths.append(sum(ex["input_mask"]))
        masks.append(sum(1 for w in ex["masked_lm_weights"] if w))
        random_next.append(ex["next_sentence_labels"][0])
  return {"instances": len(lengths), "length": statistics.mean(lengths),
          "masks": statistics.mean(masks), "random_next": statistics.mean(random_next)}


def test_partitioned_distributions_match_the_whole_corpus_over_many_seeds(tmp_path,
                                                                          monkeypatch):
  """The sample corpus in four partitions vs whole, seeds 0-15 (64-token
  instances, 4 rounds): instance
  counts, lengths, masked positions and the random-next share agree on
  average (documents cut at the bounds and smaller pools for random next
  sentences shift none of them by more than the seeds' spread)."""
  runs = {"whole": [], "parts": []}
  size = os.path.getsize(SAMPLE_TEXT)
  for seed in range(16):
    for name, partition_bytes in (("whole", size), ("parts", size // 4 + 1)):
      monkeypatch.setattr(generator, "PARTITION_BYTES", partition_bytes)
      out = tmp_path / f"{name}{seed}"
      generator.create(_config([SAMPLE_TEXT], out, random_seed=seed, dupe_factor=4,
                               max_seq_length=64, max_predictions_per_seq=10))
      runs[name].append(_stats(out))
  assert json.load(open(tmp_path / "parts0" / "t.tfrecord.meta.json"))["partitions"]["count"] == 4
  # Tolerances: a relative shift (4 partitions cut up to 3 documents among
  # the sample's 47, a few percent more instances) or 3 standard errors of
  # the difference of two means over the seeds, whichever is larger.
  for key, rel in (("instances", 0.05), ("length", 0.03), ("masks", 0.03),
                   ("random_next", 0.1)):
    whole = statistics.mean(r[key] for r in runs["whole"])
    parts = statistics.mean(r[key] for r in runs["parts"])
    stderr = (2 * statistics.variance(r[key] for r in runs["whole"]) / len(runs["whole"])) ** 0.5
    assert abs(parts - whole) <= max(rel * whole, 3 * stderr), (key, whole, parts, stderr)
