"""w2v_data as a declared generator (`textrecords.engine.protocol`): any engine runs it.

  * Units: input byte ranges cut from file sizes (at most 1 MiB; smaller so
    that each local worker gets several: `corpus.read_chunk_bytes`). A unit
    reads the whole lines that start in it (`corpus.read_unit`).
  * Pass `counts`: each unit read and counted: its distinct tokens in
    first-occurrence order and their counts, its sentences, its lines in the
    file and its decode errors. Partials merge in any order (a token's first
    occurrence is (unit, rank), `TokenCounts`). The value: the vocab
    (min-count; ties in first-occurrence order) and its counts, each unit's
    first sentence number and first line in its file (prefix sums, a few
    bytes per unit), and the sampler (subsampling and noise tables, sized by
    the vocab). The local engine carries each unit's counted tokens to its
    examples (`protocol.Carry`), so a unit is read once. The Beam and Dask
    engines merge the counts per token shard (`split_counts`) and keep only
    what can reach the vocab (`select_counts`: tokens at --min_freq, each
    shard's most frequent token for the error that names it, the other
    tokens' count as a sum) before the one global merge.
  * Examples: a unit's sentences mapped to global ids, sampled (every draw
    keyed by the global sentence number), encoded in bulk and cut at shard
    bounds, as `protocol.RecordBlock`s keyed (unit index << 32) + the
    record's number within the unit: the global order is the sentence
    order, whatever the engine or worker count.
  * Paragraph vectors (`--model=pv_*`): document ids must be unique over the
    whole input, so the pass also gathers every document's id; it runs on
    the local engine only (a one-line refusal on the others).

The bytes are those of the releases before the protocol. No TensorFlow here.
"""

import os
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from textrecords import engine as engine_lib
from textrecords.datasets import vocab as vocab_lib
from textrecords.datasets.layout import DatasetLayout
from textrecords.engine import protocol
from textrecords.engine import sharded_pass
from textrecords.errors import UserError
from textrecords.files import storage
from textrecords.files import text_input
from textrecords.files import tfrecord
from textrecords.runs import generate
from textrecords.runs import run as run_lib
from w2v_data import corpus
from w2v_data import kernel_loader
from w2v_data import sampling
from w2v_data import schema
from w2v_data import units as units_lib
from w2v_data.config import W2vConfig

CHUNK_SENTENCES = 2048  # sentences sampled at a time (the bytes do not depend on it)
_KEY_BITS = 32  # a record's key: (unit index << _KEY_BITS) + its number in the unit
# totals: centers, pairs, subsampled tokens, records, longest row's contexts,
# then each record file's centers
_SUMS = ("centers", "pairs", "subsampled_tokens", "records")
_MAX_AT = 4


class UnitCounts(NamedTuple):
  """Pass "counts"'s partial of one unit.

  Attributes:
    index: the unit's index.
    file: its input file's index.
    tokens: its distinct tokens in first-occurrence order.
    counts: int64, their counts.
    sentences: its sentences (documents).
    file_lines: its lines in the file, skipped ones included.
    decode: (lines replaced, lines skipped) as invalid UTF-8.
    line_steps: read line by line (skip_line): where a sentence's line in
      the unit stops being its number + 1 (`corpus.line_steps`); else None.
    doc_names: pv_* with --doc_id_column: each document's id; else None.
  """
  index: int
  file: int
  tokens: List[str]
  counts: np.ndarray
  sentences: int
  file_lines: int
  decode: Tuple[int, int]
  line_steps: Optional[tuple]
  doc_names: Optional[List[str]]


class TokenCounts(sharded_pass.FirstSeenCounts):
  """Merged partials of pass "counts": token counts keyed by first
  occurrence ((unit index << 32) + rank in the unit), each unit's
  `UnitCounts` without its tokens, and `dropped`: the count of the tokens
  `select_counts` left out (raw tokens all the same). Merging in any order
  gives the same."""

  def __init__(self):
    super().__init__()
    self.units: Dict[int, UnitCounts] = {}
    self.dropped = 0

  @classmethod
  def of(cls, tokens: Sequence[str], first: np.ndarray, total: np.ndarray,
         units: Dict[int, UnitCounts], dropped: int) -> "TokenCounts":
    """Counts of distinct `tokens` (their first occurrences and counts)."""
    out = cls()
    out.slot = dict(zip(tokens, range(len(tokens))))
    out.first = np.array(first, np.int64)
    out.total = np.array(total, np.int64)
    out.units, out.dropped = units, dropped
    return out

  def add(self, part) -> "TokenCounts":
    """Merges a `UnitCounts` or another `TokenCounts` into this one."""
    if isinstance(part, TokenCounts):
      self._add(*part.arrays())
      self.units.update(part.units)
      self.dropped += part.dropped
    else:
      ranks = np.arange(len(part.tokens), dtype=np.int64)
      self._add(part.tokens, (part.index << _KEY_BITS) + ranks, part.counts)
      self.units[part.index] = part._replace(tokens=[], counts=None)
    return self

  def in_first_seen_order(self) -> Tuple[Dict[str, int], np.ndarray]:
    """(token -> slot, slots' counts), slots in first-occurrence order."""
    n = len(self.slot)
    order = np.argsort(self.first[:n], kind="stable")
    names = list(self.slot)
    return ({names[i]: j for j, i in enumerate(order.tolist())}, self.total[:n][order])


def _as_token_counts(part) -> TokenCounts:
  """A partial of pass "counts" as a `TokenCounts` (itself when it is one)."""
  return part if isinstance(part, TokenCounts) else TokenCounts().add(part)


def split_counts(part, shards: int) -> List[Optional[TokenCounts]]:
  """Pass "counts"'s split: a partial's tokens cut by `sharded_pass.shard_of`,
  first occurrences kept; the units' counts and `dropped` go to shard 0."""
  counts = _as_token_counts(part)
  tokens, first, total = counts.arrays()
  pieces: List[Optional[TokenCounts]] = []
  for s, where in enumerate(sharded_pass.positions_by_shard(tokens, shards)):
    if s and not len(where):
      pieces.append(None)
      continue
    pieces.append(TokenCounts.of([tokens[i] for i in where.tolist()], first[where],
                                 total[where], counts.units if s == 0 else {},
                                 counts.dropped if s == 0 else 0))
  return pieces


def select_counts(part, min_freq: int) -> TokenCounts:
  """Pass "counts"'s select: of one shard's merged counts, the tokens seen
  `min_freq` times or more and the most frequent token but <unk> (the
  first seen of a tie: an empty vocab's error names the corpus's), the rest
  only as `dropped`; first occurrences and the units' counts kept."""
  counts = _as_token_counts(part)
  tokens, first, total = counts.arrays()
  keep = total >= min_freq
  unk = counts.slot.get(schema.UNK)
  if unk is not None:
    keep[unk] = False
  rivals = np.flatnonzero(np.arange(len(tokens)) != (-1 if unk is None else unk))
  if len(rivals):
    best = rivals[total[rivals] == total[rivals].max()]
    keep[best[np.argmin(first[best])]] = True
  where = np.flatnonzero(keep)
  return TokenCounts.of([tokens[i] for i in where.tolist()], first[where], total[where],
                        counts.units, counts.dropped + int(total[~keep].sum()))


def merge_counts(parts: List[Any]) -> TokenCounts:
  """Pass "counts"'s merge (into the first part when it is merged already)."""
  out = _as_token_counts(parts[0])
  for p in parts[1:]:
    out.add(p)
  return out


class W2vGenerator(protocol.Generator):
  """w2v_data's declaration (see the module doc).

  Args:
    cfg: the validated config.
    files: the input files, as given (expanded).
  """

  package = schema.PACKAGE
  keys_follow_units = True  # keys: (unit index << 32) + the record's number in the unit

  def __init__(self, cfg: W2vConfig, files: Sequence[str]):
    self.cfg, self.files = cfg, list(files)
    pv = cfg.model in schema.PV_MODELS
    self.mode = corpus.ReadMode("documents", cfg.doc_id_column) if pv else corpus.SENTENCES
    self.passes = (protocol.Pass("counts", self._count_unit, merge_counts, self._finish_counts,
                                 distributed=not pv, shards=sharded_pass.SHARDS,
                                 split=split_counts, select=self._select_counts),)

  # -- the run's files

  def layout(self) -> DatasetLayout:
    return DatasetLayout.for_dir(self.cfg.output_dir)

  def outputs(self) -> protocol.Outputs:
    lay = self.layout()
    small = [lay.path(schema.VOCAB_NAME)]
    if self.cfg.model in schema.PV_MODELS:
      small.append(lay.path(schema.DOCS_NAME))
    return protocol.Outputs(tuple(lay.record_paths(schema.SPLIT, self.cfg.num_shards)),
                            tuple(small), self.cfg.compression)

  def fingerprint(self) -> dict:
    return run_lib.fingerprint(schema.PACKAGE, self.cfg.output_flags(), self.files)

  def prepare(self):
    """Loads (or, on a first run, builds) the kernels here, before workers fork."""
    say = None if self.cfg.quiet else (lambda m: print(f"w2v_data: {m}", file=sys.stderr,
                                                       flush=True))
    kernel_loader.prepare(say)

  def units(self) -> List[protocol.Unit]:
    for path in self.files:
      try:
        size = storage.size(path)
      except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}") from e
      if size == 0:
        raise UserError(f"{path}: empty file (expected one line per sentence or document)")
    return protocol.units_from_sizes(self.files,
                                     corpus.read_chunk_bytes(self.files, self.cfg.num_workers))

  def check_engine(self, engine_name: str) -> None:
    if engine_name != "local" and self.cfg.model in schema.PV_MODELS:
      raise UserError(f"--model={self.cfg.model} with --engine={engine_name}: document ids "
                      "must be checked for uniqueness in one pass; use --engine=local")

  # -- pass "counts"

  def _read(self, unit: protocol.Unit) -> Tuple[corpus.ChunkCounts, int]:
    """The unit's lines counted (`corpus.read_unit`); UserError naming the
    file and line of a bad one."""
    shown = self.files[unit.file]
    result, lo = corpus.read_unit(unit.path, unit.start, unit.end, self.mode,
                                  self.cfg.on_decode_error)
    if result.unclean:
      corpus.raise_unclean_error(unit.path, self.cfg.on_decode_error, shown)
    if result.error is not None:
      before = text_input.lines_before(text_input.LineChunk(unit.path, lo, lo))
      raise UserError(f"{shown}:{before + result.error[0] + 1}: {result.error[1]}")
    return result, lo

  def _count_unit(self, unit: protocol.Unit, _values) -> protocol.Carry:
    result, _ = self._read(unit)
    partial = UnitCounts(unit.index, unit.file, result.tokens, result.counts, result.num_lines,
                         result.lines_in_file(), tuple(result.decode_errors),
                         corpus.line_steps(result.linenos), result.doc_names)
    local_ids = result.local_ids
    return protocol.Carry(partial, result, 1024 + local_ids.nbytes + 80 * len(result.tokens))

  def _select_counts(self, merged) -> TokenCounts:
    return select_counts(merged, self.cfg.min_freq)

  def _finish_counts(self, merged: Optional[TokenCounts]) -> dict:
    merged = TokenCounts() if merged is None else _as_token_counts(merged)
    slot, total = merged.in_first_seen_order()
    raw_tokens = int(total.sum()) + merged.dropped
    tokens, counts, _ = corpus.slot_vocab(slot, total, self.cfg.min_freq, self.files,
                                          raw_tokens)
    parts = [merged.units[i] for i in sorted(merged.units)]
    first = np.cumsum([0] + [p.sentences for p in parts]).astype(np.int64)
    line0 = np.zeros(len(parts), np.int64)
    for i in range(1, len(parts)):
      if parts[i].file == parts[i - 1].file:
        line0[i] = line0[i - 1] + parts[i - 1].file_lines
    cfg = self.cfg
    values = {
        "tokens": tokens, "counts": counts, "raw_tokens": raw_tokens,
        "index": {t: i for i, t in enumerate(tokens)},
        "first": first, "line0": line0,
        "unit_file": np.array([p.file for p in parts], np.int32),
        "line_steps": {p.index: p.line_steps for p in parts if p.line_steps is not None},
        "decode": tuple(int(sum(p.decode[k] for p in parts)) for k in (0, 1)),
        "docs": None,
        "sampler": sampling.SkipGramSampler.build(
            counts, subsample_t=cfg.subsample_t, max_window_size=cfg.max_window_size,
            num_noise_words=cfg.num_noise_words, seed=cfg.random_seed,
            subsample_formula=cfg.subsample_formula, model=cfg.model)}
    if cfg.model in schema.PV_MODELS:
      values["docs"] = self._doc_names(parts, values)
    return values

  def _line_of(self, unit_index: int, offset: int, values: dict) -> Tuple[str, int]:
    """(input file as given, line) of sentence `offset` of a unit."""
    steps = values["line_steps"].get(unit_index)
    line = int(values["line0"][unit_index]) + corpus.line_in_chunk(offset, steps)
    return self.files[int(values["unit_file"][unit_index])], line

  def _doc_names(self, parts: List[UnitCounts], values: dict) -> List[str]:
    """Every document's id in corpus order (its number without
    --doc_id_column); UserError naming both lines of a repeated id."""
    names: List[str] = []
    seen: Dict[str, Tuple[int, int]] = {}
    for p in parts:
      unit_names = p.doc_names or [str(len(names) + i) for i in range(p.sentences)]
      for offset, name in enumerate(unit_names):
        if name in seen:
          path, line = self._line_of(p.index, offset, values)
          raise UserError(f"{path}:{line}: duplicate document id {name!r} (first at "
                          "{}:{})".format(*self._line_of(*seen[name], values)))
        seen[name] = (p.index, offset)
        names.append(name)
    return names

  # -- examples

  def examples(self, unit: protocol.Unit, values: Dict[str, Any],
               state: Optional[corpus.ChunkCounts] = None):
    """The unit's records as blocks per shard piece; `state`: its counted
    tokens from pass "counts", or None to read it again."""
    v = values["counts"]
    counted = state if state is not None else self._read(unit)[0]
    ids, lengths = corpus.global_ids(counted.tokens, corpus.local_ids_of(counted.local_ids),
                                     v["index"])
    bounds = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=bounds[1:])
    first = int(v["first"][unit.index])
    total = int(v["first"][-1])
    totals = [0] * (_MAX_AT + 1 + self.cfg.num_shards)
    blocks: List[protocol.RecordBlock] = []
    written = 0  # records of the unit so far
    for shard, lo, hi in self._pieces(first, len(lengths), total):
      try:
        out, counts = units_lib.sample_chunk(v["sampler"], ids[bounds[lo]:bounds[hi]],
                                             lengths[lo:hi], first + lo, self.cfg.layout,
                                             with_starts=True)
      except sampling.NoNoiseWordError as e:
        path, line = self._line_of(unit.index, e.sentence_index - first, v)
        raise units_lib.no_noise_error(path, line, len(v["tokens"])) from None
      data, starts = out
      if len(starts):
        blocks.append(protocol.RecordBlock(shard, (unit.index << _KEY_BITS) + written, data,
                                           starts))
        written += len(starts)
      for k, name in enumerate(_SUMS):
        totals[k] += counts[name]
      totals[_MAX_AT] = max(totals[_MAX_AT], counts["max_contexts"])
      totals[_MAX_AT + 1 + shard] += counts["centers"]
    return blocks, tuple(totals)

  def _pieces(self, first: int, n: int, total: int):
    """(shard, lo, hi): sentences first+lo..first+hi-1 of a unit's n, cut at
    shard bounds and every CHUNK_SENTENCES."""
    g, end, shards = first, first + n, self.cfg.num_shards
    while g < end:
      shard = tfrecord.range_shard_of(g, total, shards)
      stop = min(end, (shard + 1) * total // shards, g + CHUNK_SENTENCES)
      yield shard, g - first, stop - first
      g = stop

  def merge_totals(self, partials: List[tuple]) -> tuple:
    out = list(partials[0])
    for p in partials[1:]:
      for i, x in enumerate(p):
        out[i] = max(out[i], x) if i == _MAX_AT else out[i] + x
    return tuple(out)

  # -- files and metadata

  def small_files(self, values: Dict[str, Any]) -> Dict[str, bytes]:
    v = values["counts"]
    lay = self.layout()
    out = {lay.path(schema.VOCAB_NAME): vocab_lib.tokens_file_bytes(v["tokens"])}
    if v["docs"] is not None:
      out[lay.path(schema.DOCS_NAME)] = vocab_lib.tokens_file_bytes(v["docs"])
    return out

  def metadata(self, values: Dict[str, Any], totals, infos: List[dict]) -> dict:
    v = values["counts"]
    cfg = self.cfg
    t = totals or (0,) * (_MAX_AT + 1 + cfg.num_shards)
    sums = dict(zip(_SUMS, t[:_MAX_AT]), max_contexts=t[_MAX_AT])
    num_tokens = int(v["counts"][1:].sum())
    counts = {**units_lib.summary_counts(cfg, int(v["first"][-1]), v["raw_tokens"],
                                         num_tokens, sums),
              **text_input.DecodeErrorCounts(*v["decode"]).as_dict()}
    small = self.small_files(values)
    lay = self.layout()
    docs = v["docs"]
    return units_lib.build_meta(cfg, self.fingerprint(), list(self.outputs().records),
                                list(t[_MAX_AT + 1:]), v["tokens"], v["counts"],
                                small[lay.path(schema.VOCAB_NAME)], counts, infos, docs,
                                small.get(lay.path(schema.DOCS_NAME), b""))

  def messages(self, meta: dict) -> List[str]:
    if kernel_loader.AVAILABLE or self.cfg.quiet:
      return []
    return ["w2v_data: numba is not installed (extra `fast`): sampling with numpy"]


def create(config: W2vConfig,
           engine: engine_lib.EngineOptions = engine_lib.LOCAL) -> run_lib.RunResult:
  """Runs w2v_data for one config on `engine`; returns the run's result (its
  `meta`: the metadata written).

  Raises:
    UserError: bad flags or input, an existing output (see --overwrite), or
      another run writing the same output. Nothing is left in the output
      folder on failure.
  """
  config.validate()
  return generate.create(W2vGenerator(config, config.input_files()), config, engine,
                         flag="--output_dir")
