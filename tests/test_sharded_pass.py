"""Sharded passes (`textrecords.engine.sharded_pass`): split, merge per shard,
select, then one global merge gives the value of one merge of every partial,
for w2v_data's and mt_data's token counts, over many random token streams
(ties, <unk> in the text, min-count edges, a top-k cut); on Beam and Dask
the global step sees only the selected entries; Dask with thousands of
distinct tokens gives the local bytes."""

import copy
import dataclasses
import hashlib
import os
import pickle
import random
import types

import numpy as np
import pytest

from mt_data import config as mt_config
from mt_data import generator as mt_generator
from textrecords.datasets import vocab as core_vocab
from textrecords.engine import EngineOptions
from textrecords.engine import protocol
from textrecords.engine import sharded_pass
from textrecords.errors import UserError
from w2v_data import corpus as w2v_corpus
from w2v_data import generator as w2v_generator
from w2v_data import schema as w2v_schema
from w2v_data.config import W2vConfig

STREAMS = 60  # random token streams per test


def _stream(rng: random.Random) -> list:
  """Units of tokens: a few frequent ones, many rare ones (ties and
  singletons), sometimes the literal <unk>, sometimes an empty unit."""
  words = [f"w{i}" for i in range(rng.randint(1, 60))] + ["<unk>", "é", "\udce9x"]
  weights = [rng.choice([1, 1, 2, 5, 20]) for _ in words]
  units = []
  for _ in range(rng.randint(1, 8)):
    n = rng.choice([0, 1, 3, 10, 40])
    units.append(rng.choices(words, weights, k=n))
  return units


def _distinct(tokens) -> tuple:
  """(distinct tokens in first-occurrence order, their counts)."""
  counts: dict = {}
  for t in tokens:
    counts[t] = counts.get(t, 0) + 1
  return list(counts), np.array(list(counts.values()), np.int64)


def _outcome(p: protocol.Pass, partials, sharded: bool):
  """The pass's value (or its UserError's text), sharded or in one merge;
  partials copied first (merges may write into them)."""
  parts = copy.deepcopy(partials)
  try:
    if sharded:
      return sharded_pass.value_in_one_process(p, parts)
    return p.finish(protocol.merge_all(p, parts))
  except UserError as e:
    return f"UserError: {e}"


def _w2v_unit(index: int, tokens) -> w2v_generator.UnitCounts:
  distinct, counts = _distinct(tokens)
  return w2v_generator.UnitCounts(index, 0, distinct, counts, 1, 1, (0, 0), None, None)


def _w2v_view(value):
  """What the bytes depend on (the sampler is built from the counts)."""
  if isinstance(value, str):
    return value
  return (value["tokens"], value["counts"].tolist(), value["raw_tokens"],
          value["index"], value["first"].tolist(), value["decode"])


@pytest.mark.parametrize("shards", [1, 2, 3, sharded_pass.SHARDS])
def test_w2v_sharded_counts_equal_one_merge(shards):
  rng = random.Random(shards)
  for _ in range(STREAMS):
    units = _stream(rng)
    top = max([c for u in units for c in _distinct(u)[1].tolist()] or [1])
    min_freq = rng.choice([1, 2, 3, top, top + 1])
    gen = w2v_generator.W2vGenerator(W2vConfig(input_file="in.txt", output_dir="out",
                                               min_freq=min_freq), ["in.txt"])
    p = dataclasses.replace(gen.passes[0], shards=shards)
    partials = [_w2v_unit(i, u) for i, u in enumerate(units)]
    rng.shuffle(partials)  # (merges are order-free)
    want = _w2v_view(_outcome(p, partials, sharded=False))
    assert _w2v_view(_outcome(p, partials, sharded=True)) == want, (units, min_freq)


def test_w2v_select_keeps_only_what_can_reach_the_vocab():
  """A shard's selection: the tokens at min_freq and its top token (ties:
  first seen); <unk> and the rest only as a sum, first occurrences kept."""
  counts = w2v_generator.TokenCounts().add(_w2v_unit(0, ["a", "b", "b", "<unk>", "<unk>",
                                                         "<unk>", "c", "c", "d"]))
  sel = w2v_generator.select_counts(counts, 3)
  assert list(sel.slot) == ["b"] and sel.dropped == 7  # b: top (ties with c, seen first)
  assert sel.first[:1].tolist() == [1]
  sel = w2v_generator.select_counts(counts, 2)
  assert sorted(sel.slot) == ["b", "c"] and sel.dropped == 5
  assert w2v_schema.UNK not in w2v_generator.select_counts(counts, 1).slot


def _mt_gen(limit: bool, min_freq: int) -> mt_generator.MTGenerator:
  kw = dict(num_train=3, num_val=2) if limit else dict(num_train=0, num_val=1)
  return mt_generator.MTGenerator(mt_config.MTConfig(input_file="in.txt", output_dir="out",
                                                     min_freq=min_freq, **kw), ["in.txt"])


@pytest.mark.parametrize("limit", [False, True])
def test_mt_sharded_vocab_equals_one_merge(limit):
  rng = random.Random(7 + limit)
  for _ in range(STREAMS):
    sources, targets = _stream(rng), _stream(rng)
    n = min(len(sources), len(targets))
    min_freq = rng.choice([1, 2, 3, 10])
    gen = _mt_gen(limit, min_freq)
    p = gen.passes[-1]
    assert p.name == ("vocab" if limit else "counts") and p.shards
    partials = []
    for u in range(n):
      sides = []
      for tokens in (sources[u], targets[u]):
        distinct, counts = _distinct(tokens)
        sides.append((10 * u, distinct, counts.tolist()) if limit or tokens
                     else (10 * u, [], []))
      partials.append(tuple(sides) if limit else
                      ({u: (5, 5, 0, 0, 0)}, tuple(sides) if sources[u] else None))
    rng.shuffle(partials)
    want = _outcome(p, partials, sharded=False)
    assert _outcome(p, partials, sharded=True) == want, (sources, targets, min_freq)


def test_first_seen_top_k_per_shard_equals_global_top_k():
  """A vocab capped at k tokens (most frequent, ties by first occurrence):
  each shard's top k, merged, then cut at k, is the global one."""
  rng = random.Random(3)
  for _ in range(STREAMS):
    units = _stream(rng)
    accs = [core_vocab.first_seen_of(i, u) for i, u in enumerate(units)]
    min_count, k = rng.choice([1, 2, 4]), rng.choice([1, 2, 5, 50])
    shards = rng.choice([1, 2, 5, 32])
    whole = core_vocab.merge_first_seen(copy.deepcopy(accs))
    want = core_vocab.frequency_vocab_from_counts(core_vocab.first_seen_counter(
        sharded_pass.select_first_seen(whole, min_count, k)), 1)
    by_shard = [[] for _ in range(shards)]
    for acc in copy.deepcopy(accs):
      for s, piece in enumerate(sharded_pass.split_first_seen(acc, shards)):
        by_shard[s].append(piece)
    selected = [sharded_pass.select_first_seen(core_vocab.merge_first_seen(pieces),
                                               min_count, k) for pieces in by_shard]
    assert all(len(x) <= k for x in selected)
    got = core_vocab.frequency_vocab_from_counts(core_vocab.first_seen_counter(
        sharded_pass.select_first_seen(core_vocab.merge_first_seen(selected), min_count, k)), 1)
    assert got == want, (units, min_count, k)


def test_first_seen_arrays_equal_first_seen_dicts():
  """`FirstSeenCounts` (mt_data's merged counts) gives the dict helpers'
  counts, first-seen order, split and min-count cut, merged in any order
  and through a pickle."""
  rng = random.Random(5)
  for _ in range(STREAMS):
    units = _stream(rng)
    places = rng.sample(range(1 << 30), len(units))
    accs = [core_vocab.first_seen_of(k, u) for k, u in zip(places, units)]
    arrays = [sharded_pass.FirstSeenCounts.ranked(k, list(a), [e[0] for e in a.values()])
              for k, a in zip(places, accs)]
    rng.shuffle(arrays)
    merged = pickle.loads(pickle.dumps(arrays[0]))
    for a in arrays[1:]:
      merged.add(a)
    whole = core_vocab.merge_first_seen(copy.deepcopy(accs))
    assert list(merged.counter().items()) == list(core_vocab.first_seen_counter(whole).items())
    min_count, shards = rng.choice([1, 2, 4]), rng.choice([1, 2, 5, 32])
    assert (list(merged.select(min_count).counter().items())
            == list(core_vocab.first_seen_counter(
                sharded_pass.select_first_seen(whole, min_count)).items()))
    for piece, want in zip(merged.split(shards), sharded_pass.split_first_seen(whole, shards)):
      assert sorted(piece.counter().items()) == sorted((t, e[0]) for t, e in want.items())


def test_shard_of_is_stable():
  """The same shard in every process and release (no salted hash)."""
  tokens = ("the", "a", "é", "\udce9")
  assert [sharded_pass.shard_of(t, 32) for t in tokens] == [6, 3, 30, 22]
  assert [sharded_pass.shard_of(t, 1000) for t in tokens] == [78, 907, 326, 358]


def _singletons_corpus(tmp_path) -> str:
  """Two frequent words and 300 words seen once."""
  path = tmp_path / "corpus.txt"
  path.write_text("".join(f"common rare{i} common{' also' * (i % 2)}\n" for i in range(300)))
  return str(path)


def _reporting_pass(path: str):
  """w2v's pass "counts" (min_freq 2) whose value also says what the global
  merge held: its distinct tokens and the count left out as `dropped`."""
  gen = w2v_generator.W2vGenerator(W2vConfig(input_file=path, output_dir="out", min_freq=2),
                                   [path])
  p = gen.passes[0]
  finish = p.finish
  reporting = dataclasses.replace(
      p, finish=lambda merged: (sorted(merged.slot), merged.dropped, finish(merged)["tokens"]))
  return types.SimpleNamespace(passes=(reporting,)), reporting, gen.units()


def _check_report(report, units, p) -> None:
  held, dropped, tokens = report
  assert tokens == ["<unk>", "common", "also"]
  # each shard sends its tokens at min_freq and its top one (a singleton)
  assert {"common", "also"} <= set(held) and len(held) <= 2 + sharded_pass.SHARDS
  assert dropped == 300 - (len(held) - 2)  # every other singleton only as a sum
  assert len(units) > 3
  partials = [protocol.split_carry(p.map(u, {}))[0] for u in units]
  whole = p.finish(protocol.merge_all(p, partials))  # (one merge: every token)
  assert whole[0] == sorted(["common", "also"] + [f"rare{i}" for i in range(300)])
  assert whole[2] == tokens


def test_beam_global_merge_receives_only_selected_entries(tmp_path, monkeypatch):
  beam = pytest.importorskip("apache_beam")
  from textrecords.engine import beam as beam_engine  # deferred: the beam extra
  monkeypatch.setattr(w2v_corpus, "read_chunk_bytes", lambda *_: 500)
  gen, p, units = _reporting_pass(_singletons_corpus(tmp_path))
  out = tmp_path / "report.pickle"

  def build(pipe):
    value = beam_engine._pass_value(pipe | beam.Create(units), gen, p, [], [])
    _ = value | beam.Map(lambda report: out.write_bytes(pickle.dumps(report)))

  beam_engine.run("runner=DirectRunner", build)  # (in this process: its FnApiRunner)
  _check_report(pickle.loads(out.read_bytes()), units, p)


def test_dask_global_merge_receives_only_selected_entries(tmp_path, monkeypatch):
  pytest.importorskip("distributed")
  from textrecords.engine import dask as dask_engine  # deferred: the dask extra
  monkeypatch.setattr(w2v_corpus, "read_chunk_bytes", lambda *_: 500)
  gen, p, units = _reporting_pass(_singletons_corpus(tmp_path))
  with dask_engine.client_for("", 1) as client:
    report = dask_engine._pass_value(client, gen, p.name, units, {})
  _check_report(report, units, p)


def _file_digests(out) -> dict:
  return {n: hashlib.sha256((out / n).read_bytes()).hexdigest() for n in sorted(os.listdir(out))}


def test_w2v_many_tokens_on_dask_equal_local(tmp_path, monkeypatch):
  """Thousands of distinct tokens (values over 100 kB, which distributed's
  map once failed to send), many units: Dask's sharded counts give the
  local bytes, metadata included."""
  pytest.importorskip("distributed")
  rng = random.Random(5)
  words = [f"t{i}" for i in range(6000)]
  path = tmp_path / "corpus.txt"
  path.write_text("".join(" ".join(rng.choices(words, k=12)) + "\n" for _ in range(3000)))
  monkeypatch.setattr(w2v_corpus, "read_chunk_bytes", lambda *_: 20000)
  got = {}
  for name, engine in (("local", EngineOptions()), ("dask", EngineOptions("dask"))):
    out = tmp_path / name
    w2v_generator.create(W2vConfig(input_file=str(path), output_dir=str(out), quiet=True,
                                   min_freq=3, num_workers=2), engine)
    got[name] = _file_digests(out)
  assert got["dask"] == got["local"]
