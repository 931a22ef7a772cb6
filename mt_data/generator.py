"""mt_data as a declared generator (`textrecords.engine.protocol`): any engine runs it.

  * Units: input byte ranges of `UNIT_BYTES`, cut from file sizes.
  * Pass `plan`: each unit's lines, pairs and skips -> the first global pair
    number of each unit (a few bytes per unit) and the split sizes. With
    --num_train and --num_val both set, reading stops after the last pair
    needed: units after it are not read (the local engine stops mapping
    there), and the lines after it are not counted.
  * Pass `vocab` (word): each unit's first-seen token counts of its kept
    pairs, keyed by global pair number -> both vocabularies.
    Pass `bpe` (local only): the train pairs' sentences -> two trained BPE
    tokenizers (their training needs every train pair in one process).
  * Without a pair limit (word), one pass `counts` does both, and carries
    each unit's tokenized pairs (`protocol.Carry`) to its examples.
  * `vocab` and `counts` are sharded passes (`engine.sharded_pass`): the
    Beam and Dask engines merge each side's token counts per token shard
    and keep the tokens seen --min_freq times or more before the one
    global merge (the unit counts of `counts` ride in shard 0).
  * Examples: a unit's kept pairs -> (shard, global pair number, encoded
    pair); totals: lines read, skips, decode errors, length and unk counts.

The bytes are those of every earlier mt_data release. No TensorFlow here.
"""

import bisect
import collections
import itertools
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from textrecords import engine as engine_lib
from textrecords.datasets.layout import DatasetLayout
from textrecords.engine import protocol
from textrecords.engine import sharded_pass
from textrecords.errors import UserError
from textrecords.files import storage
from textrecords.files import text_input
from textrecords.runs import generate
from textrecords.runs import run as run_lib

from mt_data import config as config_lib
from mt_data import preprocess
from mt_data import records
from mt_data import schema
from mt_data import units as units_lib
from mt_data import vocab as vocab_lib

UNIT_BYTES = 1 << 20  # input bytes per unit (the bytes do not depend on it)
_N_SKIPS = len(preprocess.SKIP_REASONS)
# totals: lines read, skips per reason, (replaced, skipped) lines, then per
# split (train, valid): pairs, source tokens, longest source, target tokens,
# longest target; then unk tokens (source, target).
_SPLIT_AT = 1 + _N_SKIPS + 2
_MAX_AT = {_SPLIT_AT + 2, _SPLIT_AT + 4, _SPLIT_AT + 7, _SPLIT_AT + 9}
_TOTALS = _SPLIT_AT + 10 + 2


class _UnitReader:
  """A unit's lines as a local run reads them: parsed, and where reading stops."""

  def __init__(self, unit: protocol.Unit, on_decode_error: str):
    self.positions: List[tuple] = []
    self.stopped = False  # True once `parsed` stopped at its pair
    self.lines, _ = text_input.chunk_lines(unit.chunk(), on_decode_error,
                                           positions=self.positions)

  def parsed(self, stop_after: Optional[int]):
    """(line index, pair or None, skip reason or None) up to the line of pair
    number `stop_after` (within the unit; None: every line)."""
    k = 0
    for j, text in enumerate(self.lines):
      pair, reason = preprocess.parse_line(text)
      yield j, pair, reason
      if pair is not None:
        if k == stop_after:
          self.stopped = True
          return
        k += 1


class MTGenerator(protocol.Generator):
  """mt_data's declaration (see the module doc).

  Args:
    cfg: the validated config.
    files: the input files, as given (expanded).
  """

  package = schema.PACKAGE

  def __init__(self, cfg: config_lib.MTConfig, files: Sequence[str]):
    self.cfg, self.files = cfg, list(files)
    self.inputs: Optional[List[dict]] = None
    plan = protocol.Pass("plan", self._unit_counts, _merge_dicts, self._plan,
                         enough=self._enough)
    if cfg.tokenizer == "bpe":
      self.passes = (plan, protocol.Pass("bpe", self._train_sentences, _merge_dicts,
                                         self._train_bpe, distributed=False))
    elif self._limit() is not None:
      self.passes = (plan, protocol.Pass("vocab", self._count_tokens, _merge_sides,
                                         self._vocabularies, shards=sharded_pass.SHARDS,
                                         split=_split_sides, select=self._select_sides))
    else:  # every pair is kept: one reading counts pairs and tokens
      self.passes = (protocol.Pass("counts", self._unit_counts_and_tokens, _merge_counts,
                                   self._plan_and_vocabularies, shards=sharded_pass.SHARDS,
                                   split=_split_counts, select=self._select_counts),)

  # -- the run's files

  def layout(self) -> DatasetLayout:
    return DatasetLayout.for_dir(self.cfg.output_dir)

  def outputs(self) -> protocol.Outputs:
    lay = self.layout()
    names = sorted(schema.VOCAB_FILE.values())
    if self.cfg.tokenizer == "bpe":
      names = sorted(names + list(schema.TOKENIZER_FILE.values()))
    shards = units_lib.record_paths(lay, self.cfg.num_shards)
    return protocol.Outputs(tuple(p for split in schema.SPLITS for p in shards[split]),
                            tuple(lay.path(n) for n in names), self.cfg.compression_name)

  def fingerprint(self) -> dict:
    return run_lib.fingerprint(schema.PACKAGE, self.cfg.output_flags(), self.files)

  def prepare(self):
    self.inputs = units_lib.inputs_info(self.files)

  def units(self) -> List[protocol.Unit]:
    return protocol.units_from_sizes(self.files, UNIT_BYTES)

  def check_engine(self, engine_name: str) -> None:
    if engine_name != "local" and self.cfg.tokenizer != "word":
      raise UserError(
          f"--tokenizer={self.cfg.tokenizer} with --engine={engine_name}: BPE training "
          "needs every train pair in one process; use --engine=local")

  # -- pass "plan"

  def _unit_counts(self, unit: protocol.Unit, _values) -> Dict[int, tuple]:
    reader = _UnitReader(unit, self.cfg.on_decode_error)
    skips = [0] * _N_SKIPS
    for text in reader.lines:
      reason = preprocess.skip_reason(text)  # (no tokenizing: only counts are needed)
      if reason is not None:
        skips[preprocess.SKIP_REASONS.index(reason)] += 1
    return {unit.index: (len(reader.lines), len(reader.lines) - sum(skips), *skips)}

  def _limit(self) -> Optional[int]:
    return preprocess.pairs_needed(self.cfg.num_train, self.cfg.num_val)

  def _enough(self, merged: Dict[int, tuple]) -> bool:
    limit = self._limit()
    return limit is not None and sum(c[1] for c in merged.values()) >= limit

  def _plan(self, merged: Optional[Dict[int, tuple]]) -> dict:
    merged = merged or {}
    first, lines, pairs, skipped = {}, 0, 0, [0] * _N_SKIPS
    for u in sorted(merged):
      c = merged[u]
      first[u] = pairs
      lines, pairs = lines + c[0], pairs + c[1]
      skipped = [a + b for a, b in zip(skipped, c[2:])]
    limit = self._limit()
    kept = pairs if limit is None else min(pairs, limit)
    n_train, n_val = units_lib.split_sizes_or_error(
        kept, lines, json.dumps(dict(zip(preprocess.SKIP_REASONS, skipped))),
        self.cfg.num_train, self.cfg.num_val, self.files)
    return {"first": first, "limit": limit, "n_train": n_train, "n_val": n_val}

  def _read(self, unit: protocol.Unit, plan: dict):
    """(reader, first global pair number, pair number to stop after) of a unit
    a local run reads; None for one it never reaches."""
    first = plan["first"].get(unit.index)
    limit = plan["limit"]
    if first is None or (limit is not None and first >= limit):
      return None
    stop = limit - 1 - first if limit is not None else None
    return _UnitReader(unit, self.cfg.on_decode_error), first, stop

  def _kept(self, unit: protocol.Unit, plan: dict):
    """(global pair number, pair) of the unit's pairs that are written."""
    read = self._read(unit, plan)
    if read is None:
      return
    reader, g, stop = read
    end = plan["n_train"] + plan["n_val"]
    for _, pair, _ in reader.parsed(stop):
      if pair is not None:
        if g < end:
          yield g, pair
        g += 1

  # -- pass "vocab" (word) / "bpe", or "counts" (plan and vocab at once)

  def _count_tokens(self, unit: protocol.Unit, values) -> Optional[tuple]:
    """First-seen token counts of the unit's kept pairs, keyed by its first
    kept pair's number."""
    kept = list(self._kept(unit, values["plan"]))
    return _first_seen_sides(kept[0][0], kept) if kept else None

  def _unit_counts_and_tokens(self, unit: protocol.Unit, _values) -> protocol.Carry:
    """Without a pair limit every pair is kept: the unit's counts (as pass
    "plan") and its first-seen token counts keyed by the unit's index; the
    unit's pairs, tokenized (a `preprocess.PairBlock`), carried to `examples`."""
    block = preprocess.read_block(unit.chunk(), self.cfg.on_decode_error)
    skips = [block.skipped.get(r, 0) for r in preprocess.SKIP_REASONS]
    counts = {unit.index: (block.lines, block.num_pairs, *skips)}
    sides = None
    if block.num_pairs:
      sides = tuple((unit.index, side.tokens, side.counts)  # (see _side_counts)
                    for side in (block.source, block.target))
    return protocol.Carry((counts, sides), block, _block_nbytes(block))

  def _plan_and_vocabularies(self, merged: Optional[tuple]) -> dict:
    counts, sides = merged or ({}, None)
    return {"plan": self._plan(counts), "vocab": self._vocabularies(sides)}

  def _select_sides(self, merged: tuple) -> tuple:
    """Pass "vocab"'s select: of a shard's (source, target) counts, the tokens
    seen --min_freq times or more (the others cannot be in a vocabulary)."""
    return tuple(_side_counts(side).select(self.cfg.min_freq) for side in merged)

  def _select_counts(self, merged: tuple) -> tuple:
    """Pass "counts"'s select: the unit counts, and `_select_sides`."""
    counts, sides = merged
    return counts, (None if sides is None else self._select_sides(sides))

  def _vocabularies(self, merged: Optional[tuple]) -> dict:
    merged = merged or (sharded_pass.FirstSeenCounts(), sharded_pass.FirstSeenCounts())
    tokens = tuple(vocab_lib.word_vocab_from_counts(_side_counts(acc).counter(), self.cfg.min_freq)
                   for acc in merged)
    return {"tokens": tokens, "bpe": None, "files": {}}

  def _train_sentences(self, unit: protocol.Unit, values) -> Optional[dict]:
    n_train = values["plan"]["n_train"]
    train = [pair for g, pair in self._kept(unit, values["plan"]) if g < n_train]
    return {unit.index: train} if train else None

  def _train_bpe(self, merged: Optional[dict]) -> dict:
    pairs = [p for u in sorted(merged or {}) for p in merged[u]]
    toks = [vocab_lib.train_bpe([p[side] for p in pairs], self.cfg.vocab_size,
                                self.cfg.min_freq) for side in (0, 1)]
    files = {schema.TOKENIZER_FILE[side]: vocab_lib.tokenizer_json(tok)
             for side, tok in zip(("source", "target"), toks)}
    return {"tokens": tuple(vocab_lib.bpe_tokens(t) for t in toks), "bpe": tuple(toks),
            "files": files}

  @staticmethod
  def _plan_of(values) -> dict:
    return values["plan"] if "plan" in values else values["counts"]["plan"]

  @staticmethod
  def _vocab(values) -> dict:
    for name in ("vocab", "bpe"):
      if name in values:
        return values[name]
    return values["counts"]["vocab"]

  # -- examples

  def _ids(self, kept, vocab) -> List[tuple]:
    """(global pair number, source ids, target ids) of kept pairs."""
    if vocab["bpe"] is None:
      codecs = [vocab_lib.WordCodec(t) for t in vocab["tokens"]]
      return [(g, codecs[0].ids(s), codecs[1].ids(t)) for g, (s, t) in kept]
    src = vocab_lib.bpe_encode_all(vocab["bpe"][0], [p[0] for _, p in kept])
    tgt = vocab_lib.bpe_encode_all(vocab["bpe"][1], [p[1] for _, p in kept])
    return [(g, s, t) for (g, _), s, t in zip(kept, src, tgt)]

  def _shard_starts(self, plan: dict) -> List[int]:
    """The first global pair number of every record file (train shards, then
    valid shards: contiguous ranges, as `tfrecord.range_shard_of` cuts them)."""
    shards, n_train = self.cfg.num_shards, plan["n_train"]
    return ([i * n_train // shards for i in range(shards)]
            + [n_train + i * plan["n_val"] // shards for i in range(shards)])

  def examples(self, unit: protocol.Unit, values: Dict[str, Any],
               state: Optional[preprocess.PairBlock] = None):
    """The unit's records; `state`: its `PairBlock` from pass "counts" (every
    pair kept, word tokenizer), or None to read the unit."""
    plan, vocab = self._plan_of(values), self._vocab(values)
    totals = [0] * _TOTALS
    if state is None and self.passes[0].name == "counts":
      # An engine that carries nothing (Dask, Beam) reads the unit as pass
      # "counts" did and maps ids per distinct token, as the local engine.
      state = preprocess.read_block(unit.chunk(), self.cfg.on_decode_error)
    if state is not None and vocab["bpe"] is None:
      first = plan["first"][unit.index]
      sides = self._block_sides(state, first, plan, vocab, totals)
    else:
      read = self._read(unit, plan)
      if read is None:
        return [], None
      ids = self._ids(self._read_lines(read, plan, totals), vocab)
      first = ids[0][0] if ids else 0  # (kept pairs are numbered one after another)
      sides = [_flat([x[side] for x in ids]) for side in (1, 2)]
    self._pair_totals(first, sides, plan, totals)
    starts = self._shard_starts(plan)
    return ([(bisect.bisect_right(starts, g) - 1, g, example)
             for g, example in enumerate(records.encode_pairs(*sides), first)], tuple(totals))

  @staticmethod
  def _block_sides(block: preprocess.PairBlock, first: int, plan: dict, vocab: dict,
                   totals: list) -> List[tuple]:
    """`_read_lines` then `_ids` (word) of a unit read whole as `block`,
    whose first pair is number `first`, ids mapped per distinct token:
    (flat ids, lengths) of each side's kept pairs."""
    totals[0] += block.lines
    for reason, n in block.skipped.items():
      totals[1 + preprocess.SKIP_REASONS.index(reason)] += n
    totals[1 + _N_SKIPS] += block.decode_errors.replaced
    totals[2 + _N_SKIPS] += block.decode_errors.skipped
    n = max(0, min(block.num_pairs, plan["n_train"] + plan["n_val"] - first))
    sides = []
    for side, tokens in zip((block.source, block.target), vocab["tokens"]):
      lengths = side.lengths[:n].astype(np.int64)
      ids = side.global_ids(vocab_lib.WordCodec(tokens).ids(side.tokens))
      sides.append((ids[:int(lengths.sum())].astype(np.int64), lengths))
    return sides

  @staticmethod
  def _pair_totals(first: int, sides: List[tuple], plan: dict, totals: list) -> None:
    """Adds each split's pairs, token counts and longest sentences, and the
    unk tokens, of the kept pairs numbered from `first` to `totals`."""
    n = len(sides[0][1])
    cut = max(0, min(n, plan["n_train"] - first))
    for at, lo, hi in ((_SPLIT_AT, 0, cut), (_SPLIT_AT + 5, cut, n)):
      if hi > lo:
        src, tgt = sides[0][1][lo:hi], sides[1][1][lo:hi]
        totals[at:at + 5] = [hi - lo, int(src.sum()), int(src.max()), int(tgt.sum()),
                             int(tgt.max())]
    totals[-2] = int(np.count_nonzero(sides[0][0] == preprocess.UNK_ID))
    totals[-1] = int(np.count_nonzero(sides[1][0] == preprocess.UNK_ID))

  @staticmethod
  def _read_lines(read, plan: dict, totals: list) -> List[tuple]:
    """Adds the lines a local run reads in the unit, their skips and decode
    errors to `totals`; returns the kept (global pair number, pair)."""
    reader, g, stop = read
    end = plan["n_train"] + plan["n_val"]
    last, kept = -1, []
    for j, pair, reason in reader.parsed(stop):
      last = j
      if reason is not None:
        totals[1 + preprocess.SKIP_REASONS.index(reason)] += 1
      else:
        if g < end:
          kept.append((g, pair))
        g += 1
    totals[0] += last + 1
    for j, replaced, skipped in reader.positions:
      if not reader.stopped or j <= last:  # lines after the stop are not read
        totals[1 + _N_SKIPS] += replaced
        totals[2 + _N_SKIPS] += skipped
    return kept

  def merge_totals(self, partials: List[tuple]) -> tuple:
    out = list(partials[0])
    for p in partials[1:]:
      for i, v in enumerate(p):
        out[i] = max(out[i], v) if i in _MAX_AT else out[i] + v
    return tuple(out)

  # -- files and metadata

  def small_files(self, values: Dict[str, Any]) -> Dict[str, bytes]:
    vocab = self._vocab(values)
    lay = self.layout()
    return {lay.path(n): data for n, data in units_lib.vocab_files(
        self.cfg.tokenizer, *vocab["tokens"], vocab["files"]).items()}

  def metadata(self, values: Dict[str, Any], totals, infos: List[dict]) -> dict:
    plan, vocab = self._plan_of(values), self._vocab(values)
    t = totals or (0,) * _TOTALS
    skipped = dict(zip(preprocess.SKIP_REASONS, t[1:1 + _N_SKIPS]))
    decode_errors = text_input.DecodeErrorCounts(*t[1 + _N_SKIPS:_SPLIT_AT])
    split_stats = {split: {"source": units_lib.length_stats(t[at], t[at + 1], t[at + 2]),
                           "target": units_lib.length_stats(t[at], t[at + 3], t[at + 4])}
                   for split, at in (("train", _SPLIT_AT), ("valid", _SPLIT_AT + 5))}
    split_names = {s: [storage.basename(p) for p in ps]
                   for s, ps in units_lib.record_paths(self.layout(), self.cfg.num_shards).items()}
    src, tgt = vocab["tokens"]
    files = units_lib.vocab_files(self.cfg.tokenizer, src, tgt, vocab["files"])
    inputs = self.inputs if self.inputs is not None else units_lib.inputs_info(self.files)
    return units_lib.build_meta(self.cfg, inputs, t[0], skipped, decode_errors,
                                plan["n_train"], plan["n_val"], split_names, split_stats,
                                len(src), len(tgt), files, {"source": t[-2], "target": t[-1]},
                                infos)

  def messages(self, meta: dict) -> List[str]:
    return units_lib.split_warnings(meta["splits"]["train"]["pairs"],
                                    meta["splits"]["valid"]["pairs"],
                                    self.cfg.num_train, self.cfg.num_val)


def _first_seen_sides(key, pairs: List[tuple]) -> tuple:
  """(source, target) first-seen counts of a unit's pairs (in corpus order),
  the unit's place in the corpus being `key`, in the compact form
  `_side_counts` reads."""
  out = []
  for side in (0, 1):
    counts = collections.Counter(itertools.chain.from_iterable(pair[side] for _, pair in pairs))
    out.append((key, list(counts), list(counts.values())))  # (in first-occurrence order)
  return tuple(out)


def _flat(sentences: List[List[int]]) -> tuple:
  """(ids concatenated, lengths) of id lists, as int64 arrays."""
  return (np.fromiter(itertools.chain.from_iterable(sentences), np.int64),
          np.fromiter(map(len, sentences), np.int64, len(sentences)))


def _block_nbytes(block: preprocess.PairBlock) -> int:
  """About the memory a `PairBlock` takes (its arrays, ~80 bytes a distinct
  token, ~1 KB of objects)."""
  return 1024 + sum(s.ids.nbytes + s.lengths.nbytes + 80 * len(s.tokens)
                    for s in (block.source, block.target))


def _merge_counts(parts: List[tuple]) -> tuple:
  """Pass "counts": unit counts and token counts merged."""
  sides = [p[1] for p in parts if p[1] is not None]
  return _merge_dicts([p[0] for p in parts]), (_merge_sides(sides) if sides else None)


def _split_sides(part: tuple, shards: int) -> List[Optional[tuple]]:
  """Pass "vocab"'s split: (source, target) counts cut by token shard
  (`sharded_pass.shard_of`); None for a shard with neither."""
  cut = [_side_counts(side).split(shards) for side in part]
  return [pair if len(pair[0]) or len(pair[1]) else None for pair in zip(*cut)]


def _split_counts(part: tuple, shards: int) -> List[Optional[tuple]]:
  """Pass "counts"'s split: the unit counts to shard 0, the token counts
  by `_split_sides`."""
  counts, sides = part
  cut = [None] * shards if sides is None else _split_sides(sides, shards)
  return [(counts, cut[0])] + [None if x is None else ({}, x) for x in cut[1:]]


def _merge_sides(parts: List[tuple]) -> tuple:
  """(source, target) first-seen counts, merged side by side (each part's
  side a `sharded_pass.FirstSeenCounts`, or the compact form `_side_counts`
  reads), into the first part's when it is merged already."""
  out = []
  for side in (0, 1):
    acc = _side_counts(parts[0][side])
    for p in parts[1:]:
      acc.add(_side_counts(p[side]))
    out.append(acc)
  return tuple(out)


def _side_counts(side) -> sharded_pass.FirstSeenCounts:
  """A side's first-seen counts: itself when merged already, or made from a
  unit's compact (key, distinct tokens in first-occurrence order, their
  counts): cheaper to send."""
  if isinstance(side, sharded_pass.FirstSeenCounts):
    return side
  return sharded_pass.FirstSeenCounts.ranked(*side)


def _merge_dicts(parts: List[dict]) -> dict:
  """Dicts keyed by unit index, merged (into the first)."""
  out = parts[0]
  for p in parts[1:]:
    out.update(p)
  return out


def create(cfg: config_lib.MTConfig, log: Optional[Callable[[str], None]] = None,
           engine: engine_lib.EngineOptions = engine_lib.LOCAL) -> run_lib.RunResult:
  """Runs mt_data for one config on `engine`; returns the run's result (its
  `meta`: the metadata written).

  Raises:
    UserError: bad settings, unreadable or unusable input, or an output that
      exists (without overwrite/resume) or cannot be written, or another run
      writing it. Nothing is left in the output folder on failure.
  """
  cfg.validate()
  files = text_input.expand_patterns(cfg.input_file, flag="--input_file")
  return generate.create(MTGenerator(cfg, files), cfg, engine, flag="--output_dir", log=log)
