"""mt_data as an Apache Beam pipeline (`--engine=beam`): the local run's bytes.

Steps (each parallel over its elements; nothing holds the corpus):
  1. Each input file is cut into byte ranges of whole lines
     (`text_input.line_chunks`, as the local engine does); each range is
     read by some worker (`preprocess.parse_line`), giving (chunk, line,
     pair number in the chunk, pair or skip reason) and the chunk's counts.
  2. Per-chunk line and pair counts give every line and pair its
     global number (side input), the split sizes and where reading would
     stop (`--num_train` + `--num_val` pairs), so `lines_read`, the skip
     counts and the decode-error counts (lines before that stop) equal a
     local run's.
  3. Vocabularies: a first-occurrence-ordered count combiner per side, then
     the shared frequency rule; ids, unk counts and length statistics per pair.
  4. Records: blocks of consecutive pairs of one shard are grouped, sorted
     and encoded (`records.framed_block`), then written per shard in block
     order; the metadata is written by the last step.
Only `--tokenizer=word` (BPE training needs all train pairs in one process).
"""

import json
import time

import apache_beam as beam

from textrecords.files import storage
from textrecords.files import text_input
from textrecords.files import tfrecord
from textrecords.datasets import vocab as core_vocab
from textrecords.engine import beam as beam_engine
from textrecords.errors import UserError
from textrecords.datasets.layout import DatasetLayout

from mt_data import preprocess
from mt_data import records
from mt_data import schema
from mt_data import units
from mt_data import vocab as vocab_lib

BLOCK = 8192  # pairs per encoded part (bytes do not depend on it)


CHUNK_BYTES = 1 << 20  # input bytes a read step takes (bytes do not depend on it)
COUNTS = "counts"  # the tag of a chunk's (lines, pairs, skips per reason)


def _read_chunk(kv, on_decode_error):
  """A chunk's line events (key, line, pair number in the chunk, pair or skip
  reason); tagged apart: its counts, and its decode errors as (key, position,
  (replaced, skipped)): a replaced line at its own line number, skipped lines
  at the number of the next line read."""
  key, chunk = kv
  positions = []
  lines, _ = text_input.chunk_lines(chunk, on_decode_error, positions=positions)
  for j, replaced, skipped in positions:
    yield beam.pvalue.TaggedOutput(beam_engine.DECODE_ERRORS, (key, j, (replaced, skipped)))
  k = 0
  skips = [0] * len(preprocess.SKIP_REASONS)
  for j, text in enumerate(lines):
    pair, reason = preprocess.parse_line(text)
    if pair is None:
      skips[preprocess.SKIP_REASONS.index(reason)] += 1
      yield key, j, -1, None, reason
    else:
      yield key, j, k, pair, None
      k += 1
  yield beam.pvalue.TaggedOutput(COUNTS, (key, (len(lines), k, *skips)))


def _decode_errors_read(event, plan, cut):
  """The (replaced, skipped) of lines a local run reads: all, or those before
  the line it stops after (`cut`, when --num_train + --num_val pairs are reached)."""
  key, j, counts = event
  if cut < 0 or plan["line_off"][key] + j < cut:
    yield counts


def _plan(per_chunk, cfg, files):
  """Offsets of each chunk's lines and pairs, totals and split sizes."""
  line_off, pair_off = {}, {}
  lines = pairs = 0
  skipped = [0] * len(preprocess.SKIP_REASONS)
  for key, c in sorted(per_chunk):
    line_off[key] = lines
    pair_off[key] = pairs
    lines += c[0]
    pairs += c[1]
    skipped = [a + b for a, b in zip(skipped, c[2:])]
  limit = preprocess.pairs_needed(cfg.num_train, cfg.num_val)
  kept = pairs if limit is None else min(pairs, limit)
  skipped_all = dict(zip(preprocess.SKIP_REASONS, skipped))
  n_train, n_val = units.split_sizes_or_error(kept, lines, json.dumps(skipped_all),
                                              cfg.num_train, cfg.num_val, files)
  return {"line_off": line_off, "pair_off": pair_off, "lines": lines, "limit": limit,
          "n_train": n_train, "n_val": n_val}


def _globalize(event, plan):
  key, j, k, pair, reason = event
  gline = plan["line_off"][key] + j
  gpair = plan["pair_off"][key] + k if pair is not None else -1
  return gline, gpair, pair, reason


def _cut_line(event, plan):
  """The line count a local reader stops after (from the last needed pair)."""
  gline, gpair, _, _ = event
  if plan["limit"] is not None and gpair == plan["limit"] - 1:
    yield gline + 1


def _skips(event, lines_read):
  gline, _, _, reason = event
  if reason is not None and gline < lines_read:
    yield tuple(int(reason == r) for r in preprocess.SKIP_REASONS)


def _kept_pairs(event, plan):
  _, gpair, pair, _ = event
  if pair is not None and gpair < plan["n_train"] + plan["n_val"]:
    yield gpair, pair


def _to_ids(item, codecs):
  gpair, (src, tgt) = item
  return gpair, codecs[0].ids(src), codecs[1].ids(tgt)


def _stats(item, plan):
  gpair, src, tgt = item
  split = "train" if gpair < plan["n_train"] else "valid"
  return split, (1, len(src), len(src), len(tgt), len(tgt),
                 src.count(preprocess.UNK_ID), tgt.count(preprocess.UNK_ID))


def _block_key(item, plan, num_shards):
  gpair = item[0]
  n_train, n_val = plan["n_train"], plan["n_val"]
  if gpair < n_train:
    base, lo, n = 0, 0, n_train
  else:
    base, lo, n = num_shards, n_train, n_val
  rel = gpair - lo
  shard = tfrecord.range_shard_of(rel, n, num_shards)
  start = shard * n // num_shards
  return (base + shard, (rel - start) // BLOCK), item


def _encode_block(kv):
  (file_index, block), items = kv
  items = sorted(items)
  data = records.framed_block([s for _, s, _ in items], [t for _, _, t in items],
                              0, len(items))
  return file_index, (block,), data, len(items)


def create(cfg, files, log, engine, run) -> dict:
  """Runs the Beam pipeline inside the `run.GeneratorRun` `run`; returns the
  same summary as the local run."""
  t0 = time.monotonic()
  out = storage.absolute(cfg.output_dir)
  inputs = units.inputs_info(files)
  lay = DatasetLayout.for_dir(out)
  dw = run.writers[0]
  shard_paths = units.record_paths(lay, cfg.num_shards)
  record_files = shard_paths["train"] + shard_paths["valid"]
  vocab_names = sorted(units.vocab_files("word", [], []))
  all_paths = [lay.path(n) for n in vocab_names] + record_files
  split_names = {s: [storage.basename(p) for p in ps] for s, ps in shard_paths.items()}
  finished = [p for p in all_paths if dw.is_finished(p)]

  def build(p):
    single = beam.pvalue.AsSingleton
    # workers run in other folders (or machines): local paths absolute
    read = (p | "files" >> beam.Create(list(enumerate(map(storage.absolute, files))))
            | "chunks" >> beam.FlatMap(beam_engine.file_chunks, CHUNK_BYTES)
            | "spread chunks" >> beam.Reshuffle()
            | "read" >> beam.FlatMap(_read_chunk, cfg.on_decode_error).with_outputs(
                beam_engine.DECODE_ERRORS, COUNTS, main="events"))
    raw = read.events
    plan = (read[COUNTS] | "all chunks" >> beam.combiners.ToList()
            | "plan" >> beam.Map(_plan, cfg, files))
    events = raw | "number" >> beam.Map(_globalize, single(plan))
    cut = (events | "cut" >> beam.FlatMap(_cut_line, single(plan))
           | "cut line" >> beam.CombineGlobally(lambda xs: max(xs, default=-1)))
    lines_read = (p | "one" >> beam.Create([None])
                  | "lines read" >> beam.Map(
                      lambda _, c, pl: c if c >= 0 else pl["lines"], single(cut), single(plan)))
    decode_errors = beam_engine.decode_error_counts(
        read[beam_engine.DECODE_ERRORS]
        | "errors read" >> beam.FlatMap(_decode_errors_read, single(plan), single(cut)))
    skipped = (events | "skips" >> beam.FlatMap(_skips, single(lines_read))
               | "count skips" >> beam.CombineGlobally(
                   beam_engine.SumTuples(["sum"] * len(preprocess.SKIP_REASONS)))
               | "skip dict" >> beam.Map(lambda t: dict(zip(preprocess.SKIP_REASONS, t))))
    pairs = events | "kept" >> beam.FlatMap(_kept_pairs, single(plan))
    vocabs = []
    for side in (0, 1):
      vocabs.append(
          pairs | f"tokens {side}" >> beam.Map(lambda kv, s=side: (kv[0], kv[1][s]))
          | f"count {side}" >> beam.CombineGlobally(beam_engine.FirstSeenCounts())
          | f"vocab {side}" >> beam.Map(core_vocab.frequency_vocab_from_counts,
                                        cfg.min_freq, preprocess.RESERVED))
    codecs = (p | "one codec" >> beam.Create([None])
              | "codecs" >> beam.Map(lambda _, s, t: (vocab_lib.WordCodec(s),
                                                      vocab_lib.WordCodec(t)),
                                     single(vocabs[0]), single(vocabs[1])))
    ids = pairs | "ids" >> beam.Map(_to_ids, single(codecs))
    stats = (ids | "lengths" >> beam.Map(_stats, single(plan))
             | "sum lengths" >> beam.CombinePerKey(beam_engine.SumTuples(
                 ["sum", "sum", "max", "sum", "max", "sum", "sum"]))
             | "stats" >> beam.combiners.ToDict())
    parts = (ids | "block keys" >> beam.Map(_block_key, single(plan), cfg.num_shards)
             | "group blocks" >> beam.GroupByKey()
             | "encode" >> beam.Map(_encode_block))
    infos = beam_engine.write_files(parts, dw, record_files, cfg.compression_name, finished)

    def summary(_, pl, lines, skips, st, src, tgt, errors):
      zero = (0,) * 7
      tr, va = st.get("train", zero), st.get("valid", zero)
      return {"plan": pl, "lines_read": lines, "skipped": skips, "decode_errors": errors,
              "stats": {s: {"source": units.length_stats(v[0], v[1], v[2]),
                            "target": units.length_stats(v[0], v[3], v[4])}
                        for s, v in (("train", tr), ("valid", va))},
              "unk": {"source": tr[5] + va[5], "target": tr[6] + va[6]},
              "vocab": (src, tgt)}

    info = (p | "one summary" >> beam.Create([None])
            | "summary" >> beam.Map(summary, single(plan), single(lines_read),
                                    single(skipped), single(stats), single(vocabs[0]),
                                    single(vocabs[1]), single(decode_errors)))
    beam_engine.finalize(infos, dw, all_paths, _build_meta(cfg, inputs, split_names),
                         [info], small_files=_small_files(out))

  try:
    beam_engine.run(engine.beam_pipeline_options, build)
  except UserError:
    dw.discard(all_paths)
    raise
  meta = dw.read_meta(schema.PACKAGE)
  for warning in units.split_warnings(meta["splits"]["train"]["pairs"],
                                      meta["splits"]["valid"]["pairs"],
                                      cfg.num_train, cfg.num_val):
    log(warning)
  summary = units.summary_of(meta, out)
  summary["files_kept_from_earlier_run"] = len(finished)
  summary["seconds"] = {"total": round(time.monotonic() - t0, 3)}
  return summary


class _build_meta:  # pylint: disable=invalid-name
  """build_meta(file infos, summary) for the finalize step (picklable)."""

  def __init__(self, cfg, inputs, split_names):
    self.cfg, self.inputs, self.split_names = cfg, inputs, split_names

  def __call__(self, infos, s):
    src, tgt = s["vocab"]
    return units.build_meta(self.cfg, self.inputs, s["lines_read"], s["skipped"],
                            s["decode_errors"], s["plan"]["n_train"], s["plan"]["n_val"],
                            self.split_names, s["stats"], len(src), len(tgt),
                            units.vocab_files("word", src, tgt), s["unk"], infos)


class _small_files:  # pylint: disable=invalid-name
  def __init__(self, out):
    self.out = out

  def __call__(self, s):
    src, tgt = s["vocab"]
    return {DatasetLayout.for_dir(self.out).path(n): data
            for n, data in units.vocab_files("word", src, tgt).items()}
