"""mt_data as an Apache Beam pipeline (`--engine=beam`): the local run's bytes.

Steps (each parallel over input chunks; no element carries the corpus):
  1. Each input file is cut into byte ranges of whole lines
     (`text_input.line_chunks`, as the local engine does); each range is
     read by some worker (`preprocess.parse_line`), which writes the
     chunk's parsed lines (pair or skip reason) as a hidden object under the
     output location; only (chunk key, object path) and the chunk's counts
     flow on.
  2. Per-chunk line and pair counts give every line and pair its
     global number (side input), the split sizes and where reading would
     stop (`--num_train` + `--num_val` pairs), so `lines_read`, the skip
     counts and the decode-error counts (lines before that stop) equal a
     local run's.
  3. Vocabularies: a first-occurrence-ordered count combiner per side (each
     chunk counts its kept pairs, keyed by global pair number), then the
     shared frequency rule.
  4. Records: each chunk maps its kept pairs to ids, sums length and unk
     statistics, and encodes each run of its pairs that falls in one shard
     as one part (`records.framed_block`, ordered by position in the shard);
     each shard is written from its parts in order; the metadata is written
     by the last step.
A runner that hands a whole PCollection to one worker as one bundle (the
local portable runner does) still gives it chunk references, never pairs.
Only `--tokenizer=word` (BPE training needs all train pairs in one process).
"""

import json
import pickle

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

CHUNK_BYTES = 1 << 20  # input bytes a read step takes (bytes do not depend on it)
COUNTS = "counts"  # the tag of a chunk's (lines, pairs, skips per reason)
STATS = "stats"  # the tag of a chunk's length statistics per split
SKIPS = "skips"  # the tag of a chunk's skip counts (lines read only)
_STAT_OPS = ("sum", "sum", "max", "sum", "max", "sum", "sum")


def _read_chunk(kv, on_decode_error, dataset):
  """A chunk -> (key, object of its parsed lines: a pair or a skip reason
  each); tagged apart: its counts, and its decode errors as (key, position,
  (replaced, skipped)): a replaced line at its own line number, skipped lines
  at the number of the next line read."""
  key, chunk = kv
  positions = []
  lines, _ = text_input.chunk_lines(chunk, on_decode_error, positions=positions)
  for j, replaced, skipped in positions:
    yield beam.pvalue.TaggedOutput(beam_engine.DECODE_ERRORS, (key, j, (replaced, skipped)))
  parsed = []
  skips = [0] * len(preprocess.SKIP_REASONS)
  for text in lines:
    pair, reason = preprocess.parse_line(text)
    if pair is None:
      skips[preprocess.SKIP_REASONS.index(reason)] += 1
      parsed.append(reason)
    else:
      parsed.append(pair)
  pairs = len(lines) - sum(skips)
  yield beam.pvalue.TaggedOutput(COUNTS, (key, (len(lines), pairs, *skips)))
  name = "lines-%06d-%09d.pickle" % key
  yield key, beam_engine.stage(dataset, name, pickle.dumps(parsed, pickle.HIGHEST_PROTOCOL))


def _lines(chunk):
  """A chunk's parsed lines (`_read_chunk`), each (line, pair number or -1,
  pair or None, skip reason or None), numbered within the chunk."""
  k = 0
  for j, item in enumerate(pickle.loads(storage.read_bytes(chunk[1]))):
    if isinstance(item, str):
      yield j, -1, None, item
    else:
      yield j, k, item, None
      k += 1


def _decode_errors_read(event, plan, cut):
  """The (replaced, skipped) of lines a local run reads: all, or those before
  the line it stops after (`cut`, when --num_train + --num_val pairs are reached)."""
  key, j, counts = event
  if cut < 0 or plan["line_off"][key] + j < cut:
    yield counts


def _plan(per_chunk, cfg, files):
  """Offsets of each chunk's lines and pairs, totals and split sizes."""
  line_off, pair_off, chunk_pairs = {}, {}, {}
  lines = pairs = 0
  skipped = [0] * len(preprocess.SKIP_REASONS)
  for key, c in sorted(per_chunk):
    line_off[key], pair_off[key], chunk_pairs[key] = lines, pairs, c[1]
    lines += c[0]
    pairs += c[1]
    skipped = [a + b for a, b in zip(skipped, c[2:])]
  limit = preprocess.pairs_needed(cfg.num_train, cfg.num_val)
  kept = pairs if limit is None else min(pairs, limit)
  skipped_all = dict(zip(preprocess.SKIP_REASONS, skipped))
  n_train, n_val = units.split_sizes_or_error(kept, lines, json.dumps(skipped_all),
                                              cfg.num_train, cfg.num_val, files)
  return {"line_off": line_off, "pair_off": pair_off, "chunk_pairs": chunk_pairs,
          "lines": lines, "limit": limit, "n_train": n_train, "n_val": n_val}


def _cut_line(chunk, plan):
  """The line count a local reader stops after (after the last needed pair),
  from the one chunk that holds that pair."""
  key = chunk[0]
  if plan["limit"] is None:
    return
  k = plan["limit"] - 1 - plan["pair_off"][key]
  if 0 <= k < plan["chunk_pairs"][key]:
    for j, kk, _, _ in _lines(chunk):
      if kk == k:
        yield plan["line_off"][key] + j + 1


def _kept(chunk, plan):
  """(global pair number, pair) of a chunk's pairs that go into the splits."""
  base, end = plan["pair_off"][chunk[0]], plan["n_train"] + plan["n_val"]
  if base >= end:
    return
  for _, k, pair, _ in _lines(chunk):
    if pair is not None and base + k < end:
      yield base + k, pair


def _side_counts(chunk, plan):
  """(side, a `FirstSeenCounts` accumulator of the chunk's kept pairs)."""
  combiner = beam_engine.FirstSeenCounts(counter=False)
  accs = [combiner.create_accumulator(), combiner.create_accumulator()]
  for gpair, pair in _kept(chunk, plan):
    for side in (0, 1):
      combiner.add_input(accs[side], (gpair, pair[side]))
  for side in (0, 1):
    if accs[side]:
      yield side, accs[side]


def _shard_of(gpair, plan, num_shards):
  """(file index: train shards then valid shards, position in its split's range)."""
  n_train = plan["n_train"]
  base, lo, n = (0, 0, n_train) if gpair < n_train else (num_shards, n_train, plan["n_val"])
  rel = gpair - lo
  return base + tfrecord.range_shard_of(rel, n, num_shards), rel


class _EncodeChunk(beam.DoFn):
  """A chunk -> parts (file index, (position,), framed records, count), one per
  run of its kept pairs in one shard; tagged apart: its length statistics
  per split and its skip counts (lines a local run reads)."""

  def __init__(self, num_shards):
    super().__init__()
    self.num_shards = num_shards

  def process(self, chunk, plan, lines_read, codecs):
    line_off = plan["line_off"][chunk[0]]
    skips = [0] * len(preprocess.SKIP_REASONS)
    for j, _, _, reason in _lines(chunk):
      if reason is not None and line_off + j < lines_read:
        skips[preprocess.SKIP_REASONS.index(reason)] += 1
    yield beam.pvalue.TaggedOutput(SKIPS, tuple(skips))
    stats = beam_engine.SumTuples(_STAT_OPS)
    per_split = {}
    run, run_file, run_start = ([], []), None, 0
    for gpair, (src, tgt) in _kept(chunk, plan):
      src, tgt = codecs[0].ids(src), codecs[1].ids(tgt)
      split = "train" if gpair < plan["n_train"] else "valid"
      stats.add_input(per_split.setdefault(split, stats.create_accumulator()),
                      (1, len(src), len(src), len(tgt), len(tgt),
                       src.count(preprocess.UNK_ID), tgt.count(preprocess.UNK_ID)))
      file_index, rel = _shard_of(gpair, plan, self.num_shards)
      if file_index != run_file and run[0]:
        yield _part(run_file, run_start, run)
        run = ([], [])
      if not run[0]:
        run_file, run_start = file_index, rel
      run[0].append(src)
      run[1].append(tgt)
    if run[0]:
      yield _part(run_file, run_start, run)
    for split, acc in per_split.items():
      yield beam.pvalue.TaggedOutput(STATS, (split, tuple(acc)))


def _part(file_index, start, run):
  return file_index, (start,), records.framed_block(run[0], run[1], 0, len(run[0])), len(run[0])


def _read_steps(p, files, cfg, dw):
  """Input files -> (chunk references, plan, lines read, decode-error counts)."""
  single = beam.pvalue.AsSingleton
  # workers run in other folders (or machines): local paths absolute
  read = (p | "files" >> beam.Create(list(enumerate(map(storage.absolute, files))))
          | "chunks" >> beam.FlatMap(beam_engine.file_chunks, CHUNK_BYTES)
          | "spread chunks" >> beam.Reshuffle()
          | "read" >> beam.FlatMap(_read_chunk, cfg.on_decode_error, dw).with_outputs(
              beam_engine.DECODE_ERRORS, COUNTS, main="chunks"))
  plan = (read[COUNTS] | "all chunks" >> beam.combiners.ToList()
          | "plan" >> beam.Map(_plan, cfg, files))
  cut = (read.chunks | "cut" >> beam.FlatMap(_cut_line, single(plan))
         | "cut line" >> beam.CombineGlobally(lambda xs: max(xs, default=-1)))
  lines_read = (p | "one" >> beam.Create([None])
                | "lines read" >> beam.Map(
                    lambda _, c, pl: c if c >= 0 else pl["lines"], single(cut), single(plan)))
  decode_errors = beam_engine.decode_error_counts(
      read[beam_engine.DECODE_ERRORS]
      | "errors read" >> beam.FlatMap(_decode_errors_read, single(plan), single(cut)))
  return read.chunks, plan, lines_read, decode_errors


def _vocab_steps(p, chunks, plan, cfg):
  """Chunk references -> (source vocab, target vocab, both codecs) singletons."""
  single = beam.pvalue.AsSingleton
  counts = chunks | "count tokens" >> beam.FlatMap(_side_counts, single(plan))
  vocabs = []
  for side in (0, 1):
    vocabs.append(
        counts | f"tokens {side}" >> beam.FlatMap(
            lambda kv, s=side: [kv[1]] if kv[0] == s else [])
        | f"count {side}" >> beam.CombineGlobally(beam_engine.FirstSeenCounts())
        | f"vocab {side}" >> beam.Map(core_vocab.frequency_vocab_from_counts,
                                      cfg.min_freq, preprocess.RESERVED))
  codecs = (p | "one codec" >> beam.Create([None])
            | "codecs" >> beam.Map(lambda _, s, t: (vocab_lib.WordCodec(s),
                                                    vocab_lib.WordCodec(t)),
                                   single(vocabs[0]), single(vocabs[1])))
  return vocabs[0], vocabs[1], codecs


def _summary(_, pl, lines, skips, st, src, tgt, errors):
  zero = (0,) * 7
  tr, va = st.get("train", zero), st.get("valid", zero)
  return {"plan": pl, "lines_read": lines, "skipped": skips, "decode_errors": errors,
          "stats": {s: {"source": units.length_stats(v[0], v[1], v[2]),
                        "target": units.length_stats(v[0], v[3], v[4])}
                    for s, v in (("train", tr), ("valid", va))},
          "unk": {"source": tr[5] + va[5], "target": tr[6] + va[6]},
          "vocab": (src, tgt)}


def _pipeline(cfg, files, dw, paths, meta_args):
  """The `build(pipeline)` of a run: paths = (record files, all files,
  finished files); meta_args = (inputs info, split names, output dir)."""
  record_files, all_paths, finished = paths
  inputs, split_names, out = meta_args

  def build(p):
    single = beam.pvalue.AsSingleton
    chunks, plan, lines_read, decode_errors = _read_steps(p, files, cfg, dw)
    src_vocab, tgt_vocab, codecs = _vocab_steps(p, chunks, plan, cfg)
    encoded = chunks | "encode" >> beam.ParDo(
        _EncodeChunk(cfg.num_shards), single(plan), single(lines_read),
        single(codecs)).with_outputs(STATS, SKIPS, main="parts")
    skipped = (encoded[SKIPS] | "count skips" >> beam.CombineGlobally(
        beam_engine.SumTuples(["sum"] * len(preprocess.SKIP_REASONS)))
               | "skip dict" >> beam.Map(lambda t: dict(zip(preprocess.SKIP_REASONS, t))))
    stats = (encoded[STATS]
             | "sum lengths" >> beam.CombinePerKey(beam_engine.SumTuples(_STAT_OPS))
             | "stats" >> beam.combiners.ToDict())
    infos = beam_engine.write_files(encoded.parts, dw, record_files, cfg.compression_name,
                                    finished)
    info = (p | "one summary" >> beam.Create([None])
            | "summary" >> beam.Map(_summary, single(plan), single(lines_read),
                                    single(skipped), single(stats), single(src_vocab),
                                    single(tgt_vocab), single(decode_errors)))
    beam_engine.finalize(infos, dw, all_paths, _build_meta(cfg, inputs, split_names),
                         [info], small_files=_small_files(out))

  return build


def create(cfg, files, log, engine, run) -> dict:
  """Runs the Beam pipeline inside the `run.GeneratorRun` `run`; returns the
  metadata written (as the local run)."""
  out = storage.absolute(cfg.output_dir)
  lay = DatasetLayout.for_dir(out)
  dw = run.writers[0]
  shard_paths = units.record_paths(lay, cfg.num_shards)
  record_files = shard_paths["train"] + shard_paths["valid"]
  all_paths = [lay.path(n) for n in sorted(units.vocab_files("word", [], []))] + record_files
  split_names = {s: [storage.basename(p) for p in ps] for s, ps in shard_paths.items()}
  finished = [p for p in all_paths if dw.is_finished(p)]
  try:
    beam_engine.run(engine.beam_pipeline_options,
                    _pipeline(cfg, files, dw, (record_files, all_paths, finished),
                              (units.inputs_info(files), split_names, out)))
  except UserError:
    dw.discard(all_paths)
    raise
  meta = dw.read_meta(schema.PACKAGE)
  for warning in units.split_warnings(meta["splits"]["train"]["pairs"],
                                      meta["splits"]["valid"]["pairs"],
                                      cfg.num_train, cfg.num_val):
    log(warning)
  return meta


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
