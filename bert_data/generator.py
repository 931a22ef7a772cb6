"""bert_data as a declared generator (`textrecords.engine.protocol`): any engine runs it.

  * Partitions: the input, laid end to end, is cut from file sizes alone
    into ceil(bytes / `PARTITION_BYTES`) ranges of about equal size
    (`units.partition_bounds`; --reference_compatible: one). Documents
    crossing a cut end there; each partition is a corpus of its own, and a
    random next sentence comes from a document of the same partition (as
    NVIDIA's LDDL draws them). An input of one partition (up to
    `PARTITION_BYTES`) is a whole corpus: the bytes of every earlier
    release. `PARTITION_BYTES` bounds what one worker holds: a partition's
    token ids (about its text's size), never the corpus's.
  * Units: input byte ranges of `UNIT_BYTES`, cut from file sizes and at
    the partition bounds (`units.partitioned_units`).
  * Pass `corpus` (partitioned when there are several partitions: merged,
    finished and sent per partition, `protocol.Pass.partitioned`): each
    unit's lines tokenized (ids, line lengths, decode errors) -> the
    partition's corpus index (documents continue across units and files),
    its --packing plan, whether [CLS]/[SEP] occur in it, the number of order
    buckets (one partition: from its tokens, as ever; several: from the
    input's size), its decode-error counts.
  * Examples: unit i of a partition's U units makes the instances of the
    i-th U-th of the partition's documents (or packed instances) in every
    --dupe_factor round. Each document's draws and its instances' order keys
    come from (seed, dupe, partition, document in it, a digest of its
    tokens), the partition left out for partition 0
    (`units.default_task_records`), so the split of the work never shows in
    the bytes. A record goes to the shard of its key's range (buckets of
    `units.estimate_buckets`, as the local engine has always cut them),
    keyed by its 64-bit order key. With several partitions, a partition's
    counts (documents, tokens, decode errors) come with the totals of its
    first unit.
  * Metadata: `units.MetaBuilder`, as every earlier release wrote it; an
    input of several partitions adds `partitions` (count, partition_bytes).

`create` runs it on Beam and Dask (`runs.generate`); on this machine
`ordered_run` runs it: the generator's pass and tasks in worker processes,
its records ordered in hash buckets sorted by workers (the local engine's
`run_generator` merges every unit's run in one process, which costs bert's
hash-ordered records about a tenth of the wall time; it gives the same
bytes, tested). Rows of --pack_instances are packed from each order
bucket's sorted instances after the sort, on every engine (`finish_file`,
`bucket_rows`). Several --output_file datasets are filled round-robin
in key order: the records go to groups of one order bucket each, dealt
over the datasets' files in turn (`deals_records`). `ordered_run` also
makes --reference_compatible (the reference's one sequential RNG), which
the other engines refuse. No TensorFlow here.
"""

import os
import sys
import weakref
from typing import Any, Dict, List, Optional

import numpy as np

from bert_data import bucket_rows
from bert_data import ordered_run
from bert_data import units as units_lib
from bert_data.config import BertConfig
from bert_data.documents import CorpusBuilder, check_corpus
from textrecords import engine as engine_lib
from textrecords.datasets.layout import DatasetLayout
from textrecords.engine import protocol
from textrecords.errors import UserError
from textrecords.files import storage
from textrecords.files import text_input
from textrecords.files import tfrecord
from textrecords.runs import generate
from textrecords.runs import run as run_lib
from textrecords.wire import features

PACKAGE = "bert_data"
UNIT_BYTES = 1 << 20  # input bytes per unit (the bytes do not depend on it)
# Input bytes per partition, at most: a worker holds one partition's corpus
# (about 1.2 bytes a text byte) and a unit's records; at 400 MB of input, 12
# partitions, so a partition's work is under a tenth of the job's
# (docs/storage_and_scaling.md).
PARTITION_BYTES = 32 << 20
_SIGN = 1 << 63  # order keys are uint64; engines sort int64 keys (key - 2**63: top bit flipped)

# Per process: the tokenizer and record encoders of a config, and the task
# context of the last corpus value (workers build them once).
_CACHE: Dict[Any, Any] = {}


class CorpusValue(dict):
  """A partition's corpus value (pass "corpus"): a dict that a weak
  reference can follow, so a worker's cached task context (`context`) is
  dropped with the value when the engine drops it (a Dask worker moving on
  to the next partition holds one corpus, not two)."""


def _forget_context(ref) -> None:
  cached = _CACHE.get("ctx")
  if cached is not None and cached[0] is ref:
    del _CACHE["ctx"]


def _held_by_engine(value):
  """A callable giving `value` while something else holds it (a weak
  reference that clears the cached context with it); a plain dict is held."""
  if isinstance(value, CorpusValue):
    return weakref.ref(value, _forget_context)
  return lambda: value


def tokenizer(config: BertConfig):
  """The run's tokenizer, loaded once per process (`units.load_tokenizer`)."""
  key = ("tok", config.tokenizer_file, config.do_lower_case)
  if key not in _CACHE:
    _CACHE[key] = units_lib.load_tokenizer(config)
  return _CACHE[key]


class BertGenerator(protocol.Generator):
  """bert_data's declaration (see the module doc).

  Args:
    config: the validated config (one --output_file, --pack_instances=1,
      not --reference_compatible: those runs are `ordered_run`'s).
    tok: the run's tokenizer (loaded by the launcher: its errors come first).
    vocab_sha: the sha256 of the vocab (or SentencePiece model) file.
  """

  package = PACKAGE

  def __init__(self, config: BertConfig, tok, vocab_sha: str):
    self.config, self.vocab_sha, self.vocab_size = config, vocab_sha, tok.vocab_size
    self.mask = units_lib.masking_params(config, tok)
    # several --output_file datasets: the instances in key order are dealt
    # over them in turn, from groups of one order bucket each
    self.deals_records = len(config.output_files) > 1
    self.sizes = units_lib.input_sizes(config.input_files)
    self.bounds = units_lib.partition_bounds(
        self.sizes, sum(self.sizes) + 1 if config.reference_compatible else PARTITION_BYTES)
    self.partition_bytes = PARTITION_BYTES
    self.passes = (protocol.Pass("corpus", self._tokenize, _merge_units, self._corpus,
                                 partitioned=self.num_partitions > 1, carries=False),)

  @property
  def num_partitions(self) -> int:
    """How many partitions the input is cut into (see the module doc)."""
    return len(self.bounds) - 1

  # -- the run's files

  def layout(self) -> DatasetLayout:
    return DatasetLayout.for_file(self.config.output_files[0])

  def outputs(self) -> protocol.Outputs:
    return protocol.Outputs(
        tuple(self.layout().record_paths(num_shards=self.config.num_shards)), (),
        tfrecord.check_compression(self.config.compression))

  def datasets(self) -> List[tuple]:
    """One dataset per --output_file, each of --num_shards files."""
    return [(d.layout, protocol.Outputs(d.record_paths, (), d.compression))
            for d in ordered_run.datasets(self.config)]

  def fingerprint(self) -> dict:
    return fingerprint(self.config, self.vocab_sha)

  def units(self) -> List[protocol.Unit]:
    return units_lib.partitioned_units(self.config.input_files, self.sizes, UNIT_BYTES,
                                       self.bounds)

  def check_engine(self, engine_name: str) -> None:
    check_engine(self.config, engine_name)

  # -- pass "corpus"

  def _tokenize(self, unit: protocol.Unit, _values) -> dict:
    """{unit index: (flat ids, line lengths, (lines replaced, skipped), partition)}."""
    flat, lengths, errors = units_lib.tokenize_chunk(unit.chunk(), tokenizer(self.config),
                                                     self.config.on_decode_error)
    return {unit.index: (flat, lengths, errors.as_tuple(), unit.partition)}

  def _corpus(self, merged: Optional[dict]) -> dict:
    """The corpus of a partition's units in order and what the examples
    derive from it."""
    merged = merged or {}
    builder, replaced, skipped = CorpusBuilder(), 0, 0
    for u in sorted(merged):
      flat, lengths, (r, s), _ = merged[u]
      builder.add(flat, lengths)
      replaced, skipped = replaced + r, skipped + s
    corpus, config = builder.build(), self.config
    partition = merged[min(merged)][3] if merged else 0
    where = ""
    if self.num_partitions == 1:
      check_corpus(corpus, config.input_files)
      buckets = units_lib.estimate_buckets(config, corpus, config.num_shards)
    else:
      where = f"partition {partition + 1} of {self.num_partitions}: "
      buckets = units_lib.buckets_for_bytes(config, sum(self.sizes), config.num_shards)
    if not config.quiet:  # (where the pass finishes: this process, or a worker)
      print(f"bert_data: {where}read {corpus.num_docs:,} documents, "
            f"{corpus.num_tokens:,} tokens", file=sys.stderr, flush=True)
    return CorpusValue(corpus=corpus, units=len(merged), decode_errors=(replaced, skipped),
                       first_unit=min(merged) if merged else 0, partition=partition,
                       clean=units_lib.is_clean(corpus, self.mask),
                       packed=units_lib.pack(config, corpus), buckets=buckets)

  def stats(self, value: dict) -> tuple:
    """A corpus value's counts: (documents, tokens, lines replaced, skipped)."""
    return (value["corpus"].num_docs, value["corpus"].num_tokens, *value["decode_errors"])

  # -- examples

  def context(self, value: dict) -> units_lib.TaskContext:
    """The task context of a corpus value (built once per process and value)."""
    cached = _CACHE.get("ctx")
    if cached is not None and cached[0]() is value:
      return cached[1]
    config = self.config
    ctx = units_lib.TaskContext(
        config, value["corpus"], self.mask, _encoder(config, self.vocab_size),
        clean=value["clean"], packed=value["packed"],
        dynamic=units_lib.make_dynamic_encoder(config), partition=value["partition"])
    _CACHE["ctx"] = (_held_by_engine(value), ctx)
    return ctx

  def tasks(self, unit: protocol.Unit, value: dict) -> List[tuple]:
    """The unit's tasks: its share of its partition's documents (or packed
    instances), unit i of U the i-th U-th (`all_tasks` of that range)."""
    total, n_units, i = self._task_span(value), value["units"], unit.index - value["first_unit"]
    return self.all_tasks(value, i * total // n_units, (i + 1) * total // n_units)

  def all_tasks(self, value: dict, lo: int = 0, hi: Optional[int] = None) -> List[tuple]:
    """The tasks (dupe, first, end) of documents (or packed instances)
    [lo, hi) (default: all) in every dupe round, cut into
    `units.DOCS_PER_TASK` documents (`PACKED_PER_TASK` instances)."""
    hi = self._task_span(value) if hi is None else hi
    per_task = (units_lib.PACKED_PER_TASK if value["packed"] is not None
                else units_lib.DOCS_PER_TASK)
    return [(dupe, a, min(hi, a + per_task))
            for dupe in range(self.config.dupe_factor) for a in range(lo, hi, per_task)]

  @staticmethod
  def _task_span(value: dict) -> int:
    """How many documents (or packed instances) the tasks cover."""
    if value["packed"] is not None:
      return value["packed"].num_instances
    return value["corpus"].num_docs

  def task_records(self, value: dict, task: tuple):
    """(uint64 order keys, encoded records) of one task (`tasks`)."""
    ctx = self.context(value)
    return units_lib.task_records_fn(ctx)(ctx, *task)

  def keyed_records(self, unit: protocol.Unit, values: Dict[str, Any]):
    """Yields (uint64 order keys, encoded records) of the unit's tasks."""
    value = values["corpus"]
    for task in self.tasks(unit, value):
      yield self.task_records(value, task)

  def examples(self, unit: protocol.Unit, values: Dict[str, Any], state: Any = None):
    """The unit's records as (shard, order key - 2**63, record); totals: how
    many (several partitions: and its partition's `stats` if it is the
    partition's first unit, else zeros)."""
    value = values["corpus"]
    shard_of = _ShardOf(value["buckets"], self._key_ranges(value["buckets"]))
    out = []
    for keys, recs in self.keyed_records(unit, values):
      out.extend(zip(shard_of(keys).tolist(), (keys ^ np.uint64(_SIGN)).view(np.int64).tolist(),
                     recs))
    if self.num_partitions == 1:
      return out, len(out)
    return out, (len(out), *(self.stats(value) if unit.index == value["first_unit"]
                             else (0, 0, 0, 0)))

  def _key_ranges(self, num_buckets: int) -> int:
    """How many key ranges `examples` sorts the records into: the shards,
    or the order buckets (the groups dealt over several --output_file)."""
    return num_buckets if self.deals_records else self.config.num_shards

  def finish_file(self, file_index: int, values: Dict[str, Any], runs):
    """--pack_instances > 1: each order bucket's sorted instances packed
    into rows (`bucket_rows`), as `ordered_run` packs them; else the runs."""
    packer = units_lib.make_row_packer(self.config)
    if packer is None:
      return runs
    return bucket_rows.packed_runs(runs, _BucketOf(self.num_buckets(values)), packer)

  def cut_keys(self, file_index: int, values: Dict[str, Any]):
    """Where record file `file_index` may be cut into segments written
    apart: where one of its order buckets but the first starts (rows are
    packed from whole buckets; this machine's `ordered_run` writes a
    bucket at a time); nowhere with several --output_file (dealt)."""
    if self.deals_records:
      return []
    num_buckets = self.num_buckets(values)
    per_shard = num_buckets // self.config.num_shards
    starts = _ShardOf(num_buckets, 1).starts[file_index * per_shard:
                                            (file_index + 1) * per_shard - 1]
    return (starts ^ np.uint64(_SIGN)).view(np.int64).tolist()

  def num_buckets(self, values: Dict[str, Any]) -> int:
    """The run's order buckets (several partitions: from the input's size)."""
    if "corpus" in values:
      return values["corpus"]["buckets"]
    return units_lib.buckets_for_bytes(self.config, sum(self.sizes), self.config.num_shards)

  def messages(self, meta: dict) -> List[str]:
    """What the run wrote (none with --quiet)."""
    if self.config.quiet:
      return []
    return [f"bert_data: wrote {meta['counts']['instances']:,} instances to "
            f"{self.config.num_shards} file(s)"]

  def merge_totals(self, partials: List[Any]) -> Any:
    """Instances (several partitions: with the partitions' `stats`), summed."""
    if isinstance(partials[0], int):
      return sum(partials)
    return tuple(int(x) for x in np.sum(partials, axis=0))

  # -- files and metadata

  def small_files(self, values: Dict[str, Any]) -> Dict[str, bytes]:
    return {}

  def metadata(self, values: Dict[str, Any], totals: Any, infos: List[dict]) -> dict:
    if "corpus" in values:  # one partition: the pass's value has the counts
      instances, stats = totals or 0, self.stats(values["corpus"])
    else:
      instances, *stats = totals or (0, 0, 0, 0, 0)
    self.check_counts(stats, instances)
    return self.meta_builder(stats, instances)(infos)

  def check_counts(self, stats, instances: int, num_files: Optional[int] = None) -> None:
    """UserError for an input of no document, or too few instances for the
    record files (default: all of them, over every --output_file)."""
    if stats[0] == 0:
      check_corpus(CorpusBuilder().build(), self.config.input_files)
    units_lib.check_instance_count(
        instances, num_files or len(self.config.output_files) * self.config.num_shards)

  def meta_builder(self, stats, instances: int) -> units_lib.MetaBuilder:
    """The metadata of a run with `instances` instances and counts `stats`
    (`stats` of its corpus, summed over the partitions): file infos -> one
    dataset's metadata."""
    config = self.config
    documents, tokens, replaced, skipped = stats
    summary = {"documents": documents, "tokens": tokens, "instances": instances,
               **text_input.DecodeErrorCounts(replaced, skipped).as_dict()}
    schema = (units_lib.make_dynamic_encoder(config)
              or _encoder(config, self.vocab_size)).schema
    partitions = None
    if self.num_partitions > 1:
      partitions = {"count": self.num_partitions, "partition_bytes": self.partition_bytes}
    return units_lib.MetaBuilder(config, self.vocab_sha, self.vocab_size,
                                 features.schema_to_json(schema),
                                 units_lib.masking_meta(config, self.mask), summary, partitions)


class _ShardOf:  # pylint: disable=too-few-public-methods
  """uint64 order keys -> their shards: bucket (key * num_buckets) >> 64
  (`files/spill.py`'s), num_buckets / num_shards buckets a shard.

  >>> _ShardOf(4, 2)(np.array([0, 2**62, 2**63 - 1, 2**63, 2**64 - 1], np.uint64)).tolist()
  [0, 0, 0, 1, 1]
  """

  def __init__(self, num_buckets: int, num_shards: int):
    # bucket >= j exactly when key >= ceil(j * 2**64 / num_buckets)
    self.starts = np.array([-(-(j << 64) // num_buckets) for j in range(1, num_buckets)],
                           np.uint64)
    self.per_shard = num_buckets // num_shards

  def __call__(self, keys: np.ndarray) -> np.ndarray:
    return np.searchsorted(self.starts, keys, side="right") // self.per_shard


class _BucketOf:  # pylint: disable=too-few-public-methods
  """Engine keys (order key - 2**63, int64) -> their order buckets."""

  def __init__(self, num_buckets: int):
    self.shard_of = _ShardOf(num_buckets, num_buckets)

  def __call__(self, keys: np.ndarray) -> np.ndarray:
    return self.shard_of(keys.view(np.uint64) ^ np.uint64(_SIGN))


def _merge_units(parts: List[dict]) -> dict:
  """Dicts keyed by unit index, merged (into the first)."""
  out = parts[0]
  for p in parts[1:]:
    out.update(p)
  return out


def _encoder(config: BertConfig, vocab_size: int):
  """The run's record encoder (`units.make_encoder`), built once per process."""
  key = ("encoder", config)
  if key not in _CACHE:
    _CACHE[key] = units_lib.make_encoder(config, _VocabSize(vocab_size))
  return _CACHE[key]


class _VocabSize:  # pylint: disable=too-few-public-methods
  """What `units.make_encoder` reads of a tokenizer."""

  def __init__(self, vocab_size: int):
    self.vocab_size = vocab_size


def fingerprint(config: BertConfig, vocab_sha: str) -> dict:
  """What determines the output bytes (`run.fingerprint`); local paths
  absolute, so --resume works from any working directory."""
  flags = config.identity_flags()
  flags["input_files"] = [storage.absolute(p) for p in config.input_files]
  flags["output_files"] = [storage.absolute(p) for p in config.output_files]
  for k in ("vocab_file", "spm_model_file"):
    if flags.get(k):
      flags[k] = storage.absolute(flags[k])
  return run_lib.fingerprint(PACKAGE, flags, config.input_files, vocab_sha256=vocab_sha)


def check_engine(config: BertConfig, engine_name: str) -> None:
  """A one-line UserError for a run the engine cannot give the local bytes of."""
  if engine_name == "local":
    return
  if config.reference_compatible:
    raise UserError("--reference_compatible runs on the local engine only: the reference's "
                    "order comes from one sequential RNG; use --engine=local")


def create(config: BertConfig,
           engine: engine_lib.EngineOptions = engine_lib.LOCAL) -> run_lib.RunResult:
  """Runs bert_data for one config on `engine`; returns the run's result
  (`metas`: one metadata per --output_file; `units.summary_of(result.meta)`:
  the summary).

  Raises:
    UserError: bad settings, input or output (one line; nothing is left in
      the output on failure).
  """
  config.validate()
  engine.validate(config.output_files, declared=True)
  check_engine(config, engine.name)
  if config.num_workers > 1:
    # Worker processes are the parallelism; Hugging Face threads would oversubscribe.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
  try:
    tok = tokenizer(config)
    vocab_sha = storage.sha256(config.tokenizer_file)
    gen = BertGenerator(config, tok, vocab_sha)
    if engine.name == "local":
      return ordered_run.create(gen, engine.segment_bytes)
    return generate.create(gen, config, engine, flag="--output_file")
  finally:
    _CACHE.clear()
