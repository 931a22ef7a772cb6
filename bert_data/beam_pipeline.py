"""bert_data's default mode as an Apache Beam pipeline (`--engine=beam`).

The same bytes as the local default mode, for any runner parallelism:
  1. Each input file is read in line batches (in order within the file; its
     decode-error counts are summed apart) and
     the batches are tokenized in parallel (`documents.encode_lines`); each
     batch's token ids go to a staged .npy file, only its line lengths flow on.
  2. The corpus index (segment and document boundaries: a few bytes a line,
     never the tokens) is built from the lengths in file/batch order by the
     local `CorpusBuilder` and is a side input; tokens are read through a
     `TokenStore` over the staged batch files.
  3. Tasks (dupe round, document range) run `pipeline.default_task_records`,
     the local engine's unit of work: every draw is keyed by (seed, dupe,
     document), every instance gets its keyed-hash order key.
  4. Instances go to hash buckets (contiguous key ranges, the local spill's
     count); per-bucket counts (a combiner, side input) give each bucket its
     global offset. Each bucket is sorted by (key, record) and framed; shard
     i is the i-th range of buckets (or, with several --output_file paths,
     records go round-robin by global position), and each file is written
     from its buckets in key order. The metadata is written last.
"""

import io
import os

import apache_beam as beam
import numpy as np

from bert_data import documents
from bert_data import masking
from bert_data import pipeline
from textrecords import features
from textrecords import text_input
from textrecords import tfrecord
from textrecords.engine import beam as beam_engine
from textrecords.errors import UserError


def _read_file(item, on_decode_error):
  """A file's line batches; its (replaced, skipped) decode-error counts tagged apart."""
  file_index, path = item
  decode_errors = text_input.DecodeErrorCounts()
  for batch, lines in enumerate(documents.iter_file_line_batches(
      path, on_decode_error, counts=decode_errors)):
    yield (file_index, batch), lines
  yield beam.pvalue.TaggedOutput(beam_engine.DECODE_ERRORS, decode_errors.as_tuple())


class _Tokenize(beam.DoFn):
  """Line batch -> staged token ids; emits (key, path, line lengths, tokens, has [CLS]/[SEP])."""

  def __init__(self, config, dataset):
    super().__init__()
    self.config, self.dataset = config, dataset
    self.tok = self.special = None

  def setup(self):
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # workers are the parallelism
    self.tok = pipeline.load_tokenizer(self.config)
    self.special = [self.tok.token_to_id("[CLS]"), self.tok.token_to_id("[SEP]")]

  def process(self, kv):
    key, lines = kv
    flat, lengths = documents.encode_lines(lines, self.tok.encode_batch)
    buf = io.BytesIO()
    np.save(buf, flat)
    path = beam_engine.stage(self.dataset, "tokens-%06d-%09d.npy" % key, buf.getvalue())
    yield key, path, lengths, len(flat), bool(np.isin(flat, self.special).any())


def _index(batches, config):
  """The corpus (structure + TokenStore), whether it is clean, and the bucket count."""
  batches = sorted(batches, key=lambda b: b[0])
  builder = documents.CorpusBuilder()
  offsets, paths = [0], []
  for _, path, lengths, n, _ in batches:
    builder.add_lengths(lengths)
    offsets.append(offsets[-1] + n)
    paths.append(path)
  corpus = documents.check_corpus(builder.build(documents.TokenStore(paths, offsets)),
                                  config.input_files)
  clean = not any(b[4] for b in batches)
  return (corpus, clean, pipeline.estimate_buckets(config, corpus, config.num_shards),
          pipeline.pack(config, corpus))


class _Instances(beam.DoFn):
  """A task -> (bucket, (order key, record)) for each of its instances."""

  def __init__(self, config):
    super().__init__()
    self.config = config
    self.mask = self.encoder = self.dynamic = None

  def setup(self):
    tok = pipeline.load_tokenizer(self.config)
    self.mask: masking.MaskingParams = pipeline.masking_params(self.config, tok)
    self.encoder = pipeline.make_encoder(self.config, tok)
    self.dynamic = pipeline.make_dynamic_encoder(self.config)

  def process(self, task, index):
    corpus, clean, num_buckets, packed = index
    ctx = pipeline.make_context(self.config, corpus, self.mask, self.encoder, clean, packed,
                                self.dynamic)
    keys, recs = pipeline.task_records_fn(ctx)(ctx, *task)
    for key, rec in zip(keys.tolist(), recs):
      yield (key * num_buckets) >> 64, (key, rec)


def _bucket_parts(kv, counts, index, config, num_files):
  bucket, items = kv
  pipeline.check_instance_count(sum(counts.values()), num_files)
  items = sorted(items)
  frame = tfrecord.frame
  if len(config.output_files) == 1:  # range shards: shard i = the i-th range of buckets
    per_shard = index[2] // num_files
    yield bucket // per_shard, (bucket,), b"".join([frame(r) for _, r in items]), len(items)
    return
  start = sum(c for b, c in counts.items() if b < bucket)  # round-robin by global position
  for f in range(num_files):
    chosen = items[(f - start) % num_files::num_files]
    yield f, (bucket,), b"".join([frame(r) for _, r in chosen]), len(chosen)


def _summary(_, index, counts, num_files, decode_errors):
  total = sum(counts.values())
  pipeline.check_instance_count(total, num_files)
  return pipeline.run_summary(index[0], total, decode_errors)


class _GroupMeta:
  def __init__(self, config, vocab_sha, vocab_size, schema, masking_block):
    self.args = (config, vocab_sha, vocab_size, schema, masking_block)

  def __call__(self, infos, summary):
    return pipeline.MetaBuilder(*self.args, summary)(infos)


def create(config, tok, vocab_sha, groups, writers, engine) -> dict:
  """Runs the pipeline for (metadata path, files) groups; returns the summary."""
  all_paths = [p for _, ps in groups for p in ps]
  finished = [p for w, (_, ps) in zip(writers, groups) for p in ps if w.is_finished(p)]
  datasets = [w for w, (_, ps) in zip(writers, groups) for _ in ps]
  n = len(all_paths)
  schema = features.schema_to_json(
      (pipeline.make_dynamic_encoder(config) or pipeline.make_encoder(config, tok)).schema)
  masking_block = pipeline.masking_meta(config, pipeline.masking_params(config, tok))

  def build(p):
    single = beam.pvalue.AsSingleton
    read = (p | "files" >> beam.Create(list(enumerate(config.input_files)))
            | "read" >> beam.FlatMap(_read_file, config.on_decode_error).with_outputs(
                beam_engine.DECODE_ERRORS, main="batches"))
    decode_errors = beam_engine.decode_error_counts(read[beam_engine.DECODE_ERRORS])
    batches = (read.batches
               | "spread batches" >> beam.Reshuffle()
               | "tokenize" >> beam.ParDo(_Tokenize(config, writers[0])))
    index = (batches | "all lengths" >> beam.combiners.ToList()
             | "index" >> beam.Map(_index, config))
    instances = (index
                 | "tasks" >> beam.FlatMap(lambda ix: pipeline.run_tasks(pipeline.make_context(
                     config, ix[0], None, None, ix[1], ix[3])))
                 | "spread tasks" >> beam.Reshuffle()
                 | "instances" >> beam.ParDo(_Instances(config), single(index)))
    counts = (instances | "ones" >> beam.Map(lambda kv: (kv[0], 1))
              | "count per bucket" >> beam.CombinePerKey(sum)
              | "bucket counts" >> beam.combiners.ToDict())
    parts = (instances | "group buckets" >> beam.GroupByKey()
             | "sort buckets" >> beam.FlatMap(_bucket_parts, single(counts), single(index),
                                              config, n))
    infos = beam_engine.write_files(parts, datasets, all_paths, tfrecord.check_compression(
        config.compression), finished)
    summary = (p | "one" >> beam.Create([None])
               | "summary" >> beam.Map(_summary, single(index), single(counts), n,
                                       single(decode_errors)))
    for i, (w, (_, ps)) in enumerate(zip(writers, groups)):  # each waits for every file
      beam_engine.finalize(infos, w, ps, _GroupMeta(config, vocab_sha, tok.vocab_size, schema,
                                                        masking_block),
                           [summary], label=f"finalize {i}")

  try:
    beam_engine.run(engine.beam_pipeline_options, build)
  except UserError:
    for w, (_, ps) in zip(writers, groups):
      w.discard(ps)
    raise
  from textrecords import metadata  # pylint: disable=import-outside-toplevel
  return pipeline.summary_of(metadata.read(groups[0][0], package="bert_data"))
