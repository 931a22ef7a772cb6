"""bert_data's default mode as an Apache Beam pipeline (`--engine=beam`).

The same bytes as the local default mode, for any runner parallelism:
  1. Each input file is cut into byte ranges of whole lines
     (`text_input.line_chunks`, as the local engine does), read and
     tokenized in parallel (`units.tokenize_chunk`; decode-error counts
     summed apart); each chunk's token ids and its piece of the corpus index
     (segment ends, segment counts at blank lines: `chunked_index`) go to
     objects under the output location, only a few numbers per chunk flow on.
  2. The index step lays the pieces end to end from those numbers
     (`chunked_index.assemble`: the local `CorpusBuilder`'s values); the
     side input holds page references, and the instance steps read the
     index and the tokens (`TokenStore`) in pages, so no worker holds a
     per-line index of the whole corpus. With --packing, the index step
     also makes the plan one chunk's window at a time
     (`chunked_index.plan_packing`) into page objects; tasks read theirs.
  3. Tasks (dupe round, document range; sized from the bucket count by
     `_task_size`, so a bucket takes few reads) run `units.default_task_records`,
     the local engine's unit of work: every draw is keyed by (seed, dupe,
     document), every instance gets its keyed-hash order key.
  4. Instances go to hash buckets (contiguous key ranges, the local spill's
     count): each task writes its records, grouped by bucket, as one object
     under the output location, and only (bucket, reference) pairs go
     through the runner's shuffle (`_InstanceRef`), so no bundle carries
     records; per-bucket counts (a combiner, side input) give each bucket
     its global offset. Each bucket is read back from its task objects
     (`READ_THREADS` ranged reads at a time), sorted by (key, record) and
     framed; shard i is the i-th range of buckets (or, with several --output_file paths,
     records go round-robin by global position), and each file is written
     from its buckets in key order. The metadata is written last.
"""

import collections
from concurrent import futures
import dataclasses
import io
import math
import os

import apache_beam as beam
import numpy as np

from bert_data import chunked_index
from bert_data import documents
from bert_data import masking
from bert_data import units
from textrecords.wire import features
from textrecords.files import storage
from textrecords.files import tfrecord
from textrecords.engine import beam as beam_engine
from textrecords.errors import UserError


CHUNK_BYTES = 1 << 20  # input bytes a tokenizing step reads (bytes do not depend on it)
READ_THREADS = 16  # segments of a bucket read at once (`_read_segments`)
SEGMENT_BYTES = 64 << 10  # records an average task writes to one bucket, at least...
TASK_BYTES = 64 << 20  # ... unless a task would then make more records than this


class _Tokenize(beam.DoFn):
  """Input chunk -> its token ids and its corpus-index piece
  (`chunked_index.piece_bytes`) as objects under the output location; emits
  (key, token ids path, `chunked_index.PieceSizes`, has [CLS]/[SEP]), and
  its (replaced, skipped) decode-error counts tagged apart."""

  def __init__(self, config, dataset):
    super().__init__()
    self.config, self.dataset = config, dataset
    self.tok = self.special = None

  def setup(self):
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # workers are the parallelism
    self.tok = units.load_tokenizer(self.config)
    self.special = [self.tok.token_to_id("[CLS]"), self.tok.token_to_id("[SEP]")]

  def process(self, kv):
    key, chunk = kv
    flat, lengths, decode_errors = units.tokenize_chunk(chunk, self.tok,
                                                        self.config.on_decode_error)
    buf = io.BytesIO()
    np.save(buf, flat)
    path = beam_engine.stage(self.dataset, "tokens-%06d-%09d.npy" % key, buf.getvalue())
    data, fields = chunked_index.piece_bytes(lengths)
    sizes = chunked_index.PieceSizes(
        beam_engine.stage(self.dataset, "index-%06d-%09d.npz" % key, data), *fields)
    yield key, path, sizes, bool(np.isin(flat, self.special).any())
    yield beam.pvalue.TaggedOutput(beam_engine.DECODE_ERRORS, decode_errors.as_tuple())


def _index(batches, config, dataset):
  """The corpus (index pages + TokenStore), whether it is clean, the bucket
  count and the --packing plan (page references, or None).

  Only a few numbers per input chunk meet here: the index itself stays in
  the chunks' pieces, read in pages by the steps that use it.
  """
  batches = sorted(batches, key=lambda b: b[0])
  seg_starts, doc_starts, offsets = chunked_index.assemble([b[2] for b in batches])
  tokens = documents.TokenStore([b[1] for b in batches], offsets)
  corpus = documents.check_corpus(documents.Corpus(tokens, seg_starts, doc_starts),
                                  config.input_files)
  clean = not any(b[3] for b in batches)
  packed = None
  if config.packing:
    packed = chunked_index.plan_packing(
        corpus, [b[2] for b in batches], config.max_seq_length, config.packing,
        lambda name, data: beam_engine.stage(dataset, name, data))
  return corpus, clean, units.estimate_buckets(config, corpus, config.num_shards), packed


_InstanceRef = collections.namedtuple("_InstanceRef", "task path offset size count")


def _task_size(config, corpus, num_buckets: int, packed) -> int:
  """Documents (or packed instances) per instance task.

  A task writes one segment per bucket it has records for, and a bucket is
  read back one segment (ranged read) per task. So tasks are made big enough
  that an average segment holds about `SEGMENT_BYTES` of records: then the
  tasks number at most `units._BUCKET_BYTES` / `SEGMENT_BYTES` +
  --dupe_factor (512 + dupe), and so do a bucket's reads. A task makes at
  most about `TASK_BYTES` of records (64 MB; past ~1000 buckets the reads per
  bucket grow again, as about buckets / 2), and never fewer units than the
  local engine's tasks. No record depends on a task's extent.
  """
  default = units.DOCS_PER_TASK if packed is None else units.PACKED_PER_TASK
  num_units = corpus.num_docs if packed is None else packed.num_instances
  per_unit = units.estimate_record_bytes(config, corpus) / max(1, config.dupe_factor * num_units)
  want = min(num_buckets * SEGMENT_BYTES, TASK_BYTES) / max(per_unit, 1.0)
  return max(default, math.ceil(want))


class _Instances(beam.DoFn):
  """A task -> (bucket, `_InstanceRef`) per bucket its instances fall in; the
  records themselves go to one object per task (`_bucket_blob` per bucket)."""

  def __init__(self, config, dataset):
    super().__init__()
    self.config, self.dataset = config, dataset
    self.mask = self.encoder = self.dynamic = None

  def setup(self):
    tok = units.load_tokenizer(self.config)
    self.mask: masking.MaskingParams = units.masking_params(self.config, tok)
    self.encoder = units.make_encoder(self.config, tok)
    self.dynamic = units.make_dynamic_encoder(self.config)

  def process(self, task, index):
    corpus, clean, num_buckets, packed = index
    ctx = units.TaskContext(self.config, corpus, self.mask, self.encoder, clean, packed,
                            self.dynamic)
    keys, recs = units.task_records_fn(ctx)(ctx, *task)
    by_bucket = collections.defaultdict(list)
    for key, rec in zip(keys.tolist(), recs):
      by_bucket[(key * num_buckets) >> 64].append((key, rec))
    if not by_bucket:
      return
    blobs, refs, offset = [], [], 0
    for bucket in sorted(by_bucket):
      blobs.append(_bucket_blob(by_bucket[bucket]))
      refs.append((bucket, offset, len(blobs[-1]), len(by_bucket[bucket])))
      offset += len(blobs[-1])
    path = beam_engine.stage(self.dataset, "instances-%d-%09d-%09d" % tuple(task),
                             b"".join(blobs))
    for bucket, start, size, count in refs:
      yield bucket, _InstanceRef(tuple(task), path, start, size, count)


def _bucket_blob(items) -> bytes:
  """(order key, record) pairs as bytes: the keys (uint64), the record
  lengths (uint32), then the records."""
  keys = np.fromiter((k for k, _ in items), "<u8", len(items))
  lengths = np.fromiter((len(r) for _, r in items), "<u4", len(items))
  return b"".join([keys.tobytes(), lengths.tobytes(), *(r for _, r in items)])


def _read_segment(ref: _InstanceRef) -> bytes:
  """One task's segment of a bucket: `ref.size` bytes at `ref.offset` of its object.

  Raises:
    UserError: the object cannot be read, or holds fewer bytes (named in the message).
  """
  with storage.open_read(ref.path) as f:
    try:
      f.seek(ref.offset)
      blob = f.read(ref.size)
    except OSError as e:
      raise UserError(f"cannot read {ref.path}: {getattr(e, 'strerror', None) or e}") from e
  if len(blob) != ref.size:
    raise UserError(f"cannot read {ref.path}: {len(blob)} bytes at offset {ref.offset}, "
                    f"expected {ref.size} (changed or removed while the run went on?)")
  return blob


def _read_segments(refs: list):
  """Yields the segments of `refs` in their order, read up to `READ_THREADS`
  at a time (an object store takes tens of ms a read); a segment is dropped
  once yielded, so at most the bucket's bytes are held. The first error
  cancels the reads not yet started and is raised."""
  if len(refs) < 2:
    yield from (_read_segment(r) for r in refs)
    return
  with futures.ThreadPoolExecutor(min(READ_THREADS, len(refs))) as pool:
    try:
      yield from pool.map(_read_segment, refs)
    except BaseException:
      pool.shutdown(wait=False, cancel_futures=True)
      raise


def _read_bucket(refs) -> list:
  """A bucket's (order key, record) pairs, read from its tasks' objects, sorted."""
  refs = sorted(refs)
  items = []
  for ref, blob in zip(refs, _read_segments(refs)):
    n = ref.count
    keys = np.frombuffer(blob, "<u8", n).tolist()
    ends = (np.cumsum(np.frombuffer(blob, "<u4", n, 8 * n), dtype=np.int64) + 12 * n).tolist()
    items.extend(zip(keys, (blob[a:b] for a, b in zip([12 * n] + ends[:-1], ends))))
  items.sort()
  return items


def _bucket_parts(kv, counts, index, config, num_files):
  bucket, refs = kv
  units.check_instance_count(sum(counts.values()), num_files)
  items = _read_bucket(refs)
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
  units.check_instance_count(total, num_files)
  return units.run_summary(index[0], total, decode_errors)


class _GroupMeta:
  def __init__(self, config, vocab_sha, vocab_size, schema, masking_block):
    self.args = (config, vocab_sha, vocab_size, schema, masking_block)

  def __call__(self, infos, summary):
    return units.MetaBuilder(*self.args, summary)(infos)


def create(config, tok, vocab_sha, groups, writers, engine) -> list:
  """Runs the pipeline for (metadata path, files) groups; returns each
  group's metadata written."""
  all_paths = [p for _, ps in groups for p in ps]
  finished = [p for w, (_, ps) in zip(writers, groups) for p in ps if w.is_finished(p)]
  datasets = [w for w, (_, ps) in zip(writers, groups) for _ in ps]
  n = len(all_paths)
  schema = features.schema_to_json(
      (units.make_dynamic_encoder(config) or units.make_encoder(config, tok)).schema)
  masking_block = units.masking_meta(config, units.masking_params(config, tok))

  # Workers run in other folders (or machines): their local paths absolute;
  # the metadata keeps the flags as given.
  on_worker = dataclasses.replace(
      config, input_files=tuple(map(storage.absolute, config.input_files)),
      **{k: storage.absolute(getattr(config, k)) for k in ("vocab_file", "spm_model_file")
         if getattr(config, k)})

  def build(p):
    single = beam.pvalue.AsSingleton
    read = (p | "files" >> beam.Create(list(enumerate(on_worker.input_files)))
            | "chunks" >> beam.FlatMap(beam_engine.file_chunks, CHUNK_BYTES)
            | "spread chunks" >> beam.Reshuffle()
            | "tokenize" >> beam.ParDo(_Tokenize(on_worker, writers[0])).with_outputs(
                beam_engine.DECODE_ERRORS, main="batches"))
    decode_errors = beam_engine.decode_error_counts(read[beam_engine.DECODE_ERRORS])
    batches = read.batches
    index = (batches | "all pieces" >> beam.combiners.ToList()
             | "index" >> beam.Map(_index, config, writers[0]))
    instances = (index
                 | "tasks" >> beam.FlatMap(lambda ix: units.run_tasks(
                     units.TaskContext(config, ix[0], None, None, ix[1], ix[3]),
                     _task_size(config, ix[0], ix[2], ix[3])))
                 | "spread tasks" >> beam.Reshuffle()
                 | "instances" >> beam.ParDo(_Instances(on_worker, writers[0]), single(index)))
    counts = (instances | "per task" >> beam.Map(lambda kv: (kv[0], kv[1].count))
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
  return [w.read_meta("bert_data") for w in writers]
