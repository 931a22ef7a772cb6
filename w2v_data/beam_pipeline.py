"""w2v_data (skip-gram, CBOW) as an Apache Beam pipeline (`--engine=beam`).

The same bytes as the local run, for any runner parallelism:
  1. Each input file is cut into byte chunks at line ends (`corpus.file_chunks`)
     and each chunk is read and counted by the local run's read unit
     (`corpus.read_chunk`; a chunk that is not clean UTF-8 is decoded line
     by line there, as locally). Each chunk's tokens and local ids go to a
     hidden object under the output location; only its key, that object's
     path and its line counts flow on.
  2. Per-chunk line counts (side input) number the sentences globally (and
     give each chunk its first line in its file, for errors); the
     vocabulary is a first-occurrence-ordered count combiner, run per file
     where the chunks are read and then over the files, then the shared
     rule (`corpus.vocab_and_counts`).
  3. Each chunk's ids (`corpus.global_ids`) are sampled and encoded by
     `units.sample_chunk` (every draw keyed by the global sentence index),
     cut at shard boundaries; each shard is written from its chunks in order;
     counts are combined and the metadata is written by the last step.
No element carries the corpus's tokens: a runner that hands a whole
PCollection to one worker as one bundle (the local portable runner does)
still gives it chunk references, never the corpus.
Paragraph-vector models (`--model=pv_*`) stay local: document ids must be
unique over the whole input.
"""

import io

import apache_beam as beam
import numpy as np

from textrecords.files import storage
from textrecords.files import tfrecord
from textrecords.datasets import vocab as vocab_lib
from textrecords.engine import beam as beam_engine
from textrecords.errors import UserError
from textrecords.datasets.layout import DatasetLayout
from w2v_data import corpus as corpus_lib
from w2v_data import sampling
from w2v_data import schema
from w2v_data import units

_TOTAL_KEYS = ("centers", "pairs", "subsampled_tokens", "records", "max_contexts", "tokens")
_TOTAL_OPS = ("sum", "sum", "sum", "sum", "max", "sum")


def _units(item):
  file_index, path = item
  chunks = corpus_lib.file_chunks(path, corpus_lib.CHUNK_BYTES)
  for i, (start, end) in enumerate(chunks):
    yield file_index, i, path, start, end, i == len(chunks) - 1


def _stage_chunk(dataset, key, counts_in) -> str:
  """Writes a read chunk's tokens and local ids (and, read line by line, its
  line numbers) as a hidden object under the output location; returns its
  path. Only this reference flows on: no step holds all token ids."""
  linenos = counts_in.linenos
  buf = io.BytesIO()
  np.savez(buf, tokens=np.frombuffer("\n".join(counts_in.tokens).encode("utf-8"), np.uint8),
           local_ids=counts_in.local_ids,
           linenos=np.asarray(linenos if linenos is not None else [], np.int64))
  return beam_engine.stage(dataset, "ids-%06d-%09d.npz" % key, buf.getvalue())


def _load_chunk(staged: str):
  """(tokens, local ids, line numbers or None) of a chunk `_stage_chunk` wrote."""
  with np.load(io.BytesIO(storage.read_bytes(staged)), allow_pickle=False) as z:
    text = z["tokens"].tobytes().decode("utf-8")
    linenos = z["linenos"]
    return (text.split("\n") if text else []), z["local_ids"], (linenos if len(linenos) else None)


def _read(unit, dataset, on_decode_error):
  """A byte range -> (key, staged object, input path, sentences, decode
  errors, lines in the file), and its token counts tagged "counts" (order
  key, distinct tokens, counts) keyed by file."""
  file_index, i, path, start, end, last = unit
  key = (file_index, i)
  counts_in = corpus_lib.read_chunk(path, start, end, last, corpus_lib.SENTENCES,
                                    on_decode_error)
  if counts_in.unclean:
    corpus_lib.raise_unclean_error(path, on_decode_error)
  yield beam.pvalue.TaggedOutput("counts", (file_index, (key, counts_in.tokens, counts_in.counts)))
  yield (key, _stage_chunk(dataset, key, counts_in), path, counts_in.num_lines,
         counts_in.decode_errors, counts_in.lines_in_file())


def _offsets(per_chunk):
  """Chunk key -> (first sentence, lines of its file before it); and the total."""
  out, total, file_lines, current = {}, 0, 0, None
  for key, sentences, lines in sorted(per_chunk):
    if key[0] != current:
      current, file_lines = key[0], 0
    out[key] = (total, file_lines)
    total += sentences
    file_lines += lines
  return out, total


class _Vocab:
  """(tokens, counts, index, raw tokens); raises the local run's UserErrors."""

  def __init__(self, min_freq, files):
    self.min_freq, self.files = min_freq, files

  def __call__(self, counter):
    raw_tokens = sum(counter.values())
    tokens, counts = corpus_lib.vocab_and_counts(counter, raw_tokens, self.min_freq, self.files)
    return tokens, counts, {t: i for i, t in enumerate(tokens)}, raw_tokens


class _SampleChunk(beam.DoFn):
  """A read chunk -> parts per shard it overlaps, and counts (tagged)."""

  def __init__(self, config, finished_shards):
    super().__init__()
    self.config = config
    self.finished = frozenset(finished_shards)

  def process(self, chunk, offsets, vocab, sampler):
    key, staged, path = chunk[:3]
    local_tokens, local_ids, linenos = _load_chunk(staged)
    starts, total = offsets
    first, lines_before = starts[key]
    tokens, _, index, _ = vocab
    ids, lengths = corpus_lib.global_ids(local_tokens, local_ids, index)
    bounds = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=bounds[1:])
    num_shards = self.config.num_shards
    g, end = first, first + len(lengths)
    while g < end:
      shard = tfrecord.range_shard_of(g, total, num_shards)
      stop = min(end, (shard + 1) * total // num_shards)
      i0, i1 = g - first, stop - first
      write = shard not in self.finished
      try:
        data, counts = units.sample_chunk(sampler, ids[bounds[i0]:bounds[i1]],
                                          lengths[i0:i1], g, self.config.layout, write)
      except sampling.NoNoiseWordError as e:
        offset = e.sentence_index - first
        line = lines_before + (int(linenos[offset]) if linenos is not None else offset + 1)
        raise units.no_noise_error(path, line, len(tokens)) from None
      counts["tokens"] = int(lengths[i0:i1].sum())
      if write:
        yield shard, (g,), data, counts["centers" if self.config.layout == "center"
                                        else "records"]
      yield beam.pvalue.TaggedOutput("counts", (shard, tuple(counts[k] for k in _TOTAL_KEYS)))
      g = stop


class _BuildMeta:
  def __init__(self, config, fingerprint, record_paths):
    self.config, self.fingerprint, self.record_paths = config, fingerprint, record_paths

  def __call__(self, infos, s):
    tokens, counts_arr, _, raw_tokens = s["vocab"]
    per_shard = s["totals"]
    totals = {k: 0 for k in _TOTAL_KEYS}
    for shard in range(len(self.record_paths)):
      t = per_shard.get(shard)
      if t is not None:
        units.add_counts(totals, dict(zip(_TOTAL_KEYS, t)))
        totals["tokens"] += t[_TOTAL_KEYS.index("tokens")]
    file_centers = [per_shard.get(i, (0,))[0] for i in range(len(self.record_paths))]
    counts = {**units.summary_counts(self.config, s["sentences"], raw_tokens,
                                     totals["tokens"], totals),
              **s["decode_errors"].as_dict()}
    return units.build_meta(self.config, self.fingerprint, self.record_paths, file_centers,
                            tokens, counts_arr, vocab_lib.tokens_file_bytes(tokens), counts,
                            infos)


class _SmallFiles:
  def __init__(self, vocab_path):
    self.vocab_path = vocab_path

  def __call__(self, s):
    return {self.vocab_path: vocab_lib.tokens_file_bytes(s["vocab"][0])}


def _read_chunks(p, files, config, writer):
  """Input files -> (chunks, per-file token counts, decode-error counts).

  A chunk is (key, staged object, input path, sentences, decode errors,
  lines in the file).
  """
  # workers run in other folders (or machines): local paths absolute
  file_list = p | "files" >> beam.Create(list(enumerate(map(storage.absolute, files))))
  read = (file_list | "chunks" >> beam.FlatMap(_units)
          | "spread" >> beam.Reshuffle()
          | "read" >> beam.FlatMap(_read, writer, config.on_decode_error).with_outputs(
              "counts", main="chunks"))
  # counts are combined per file where they are made (a worker holds a
  # vocabulary, never the corpus)
  file_counts = (read.counts
                 | "count per file" >> beam.CombinePerKey(beam_engine.FirstSeenCounts(counter=False))
                 | "drop file" >> beam.Values())
  decode_errors = beam_engine.decode_error_counts(
      read.chunks | "decode errors" >> beam.Map(lambda c: c[4]))
  return read.chunks, file_counts, decode_errors


def _vocab_steps(file_counts, config, files):
  """Per-file token counts -> the vocab and the sampler (singletons)."""
  vocab = (file_counts | "count tokens" >> beam.CombineGlobally(beam_engine.FirstSeenCounts())
           | "vocab" >> beam.Map(_Vocab(config.min_freq, files)))
  sampler = (vocab | "sampler" >> beam.Map(
      lambda v: sampling.SkipGramSampler.build(
          v[1], subsample_t=config.subsample_t, max_window_size=config.max_window_size,
          num_noise_words=config.num_noise_words, seed=config.random_seed,
          subsample_formula=config.subsample_formula, model=config.model)))
  return vocab, sampler


def _summary(_, vocab, totals, offsets, decode_errors):
  return {"vocab": vocab, "totals": totals, "sentences": offsets[1],
          "decode_errors": decode_errors}


def _pipeline(config, files, writer, fingerprint, finished):
  """The `build(pipeline)` of a run (see the module docstring)."""
  lay = DatasetLayout.for_dir(config.output_dir)
  vocab_path = lay.path(schema.VOCAB_NAME)
  record_paths = lay.record_paths(schema.SPLIT, config.num_shards)

  def build(p):
    single = beam.pvalue.AsSingleton
    chunks, file_counts, decode_errors = _read_chunks(p, files, config, writer)
    offsets = (chunks | "lines" >> beam.Map(lambda c: (c[0], c[3], c[5]))
               | "all line counts" >> beam.combiners.ToList()
               | "offsets" >> beam.Map(_offsets))
    vocab, sampler = _vocab_steps(file_counts, config, files)
    sampled = (chunks
               | "sample" >> beam.ParDo(_SampleChunk(config, finished), single(offsets),
                                        single(vocab), single(sampler)).with_outputs(
                                            "counts", main="parts"))
    totals = (sampled.counts
              | "sum per shard" >> beam.CombinePerKey(beam_engine.SumTuples(_TOTAL_OPS))
              | "shard totals" >> beam.combiners.ToDict())
    infos = beam_engine.write_files(sampled.parts, writer, record_paths, config.compression,
                                    [record_paths[i] for i in finished])
    summary = (p | "one" >> beam.Create([None])
               | "summary" >> beam.Map(_summary, single(vocab), single(totals),
                                       single(offsets), single(decode_errors)))
    beam_engine.finalize(infos, writer, [vocab_path] + record_paths,
                         _BuildMeta(config, fingerprint, record_paths), [summary],
                         small_files=_SmallFiles(vocab_path))

  return build


def create(config, files, writer, fingerprint, engine) -> dict:
  """Runs the Beam pipeline; returns the metadata written (as the local run).

  Workers write the output in place through `writer` (the run's
  `direct_output.DirectDataset`, made by `run.GeneratorRun`): a URL or a
  local path on a mount every worker has.
  """
  lay = DatasetLayout.for_dir(config.output_dir)
  vocab_path = lay.path(schema.VOCAB_NAME)
  record_paths = lay.record_paths(schema.SPLIT, config.num_shards)
  finished = [i for i, p in enumerate(record_paths) if writer.is_finished(p)]
  try:
    beam_engine.run(engine.beam_pipeline_options,
                    _pipeline(config, files, writer, fingerprint, finished))
  except UserError:
    writer.discard([vocab_path] + record_paths)
    raise
  return writer.read_meta(schema.PACKAGE)
