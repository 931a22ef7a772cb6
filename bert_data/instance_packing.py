"""Packed BERT rows (`--pack_instances=N`): several finished instances share a row.

Each instance keeps its own `[CLS] A [SEP] B [SEP]`, its masked positions and
its next-sentence (or sentence-order) label; the row says which token belongs
to which instance (`instance_ids`, 1..N, 0 = padding) and where each instance
starts (`position_ids` restart at 0), so a model can keep attention inside
each instance (`attention_mask`). This is Graphcore's packed BERT (arXiv
2107.02027), not RoBERTa's `--packing=full_sentences` (`bert_data.packing`),
which drops the sentence-pair task and lets attention cross documents.

Where it runs: tasks encode each finished instance compactly
(`CompactInstanceEncoder`, in place of the record encoder); once a bucket's
instances are in their final order, `RowPacker` packs every window of
`PACK_WINDOW` consecutive instances with `pack_lengths` and encodes the rows
(`records.PackedRecordEncoder`: slices of the window's varints, no dense rows).
Packing draws nothing, so the rows depend only on that order: the same bytes
for any number of workers.

No TensorFlow here (`attention_mask` takes numpy or TF tensors alike).
"""

import bisect
import itertools
import math
import struct
from typing import List, Optional, Sequence

import numpy as np

from bert_data import records
from bert_data import schema as S
from bert_data.instances import Instance

MAX_PACK_INSTANCES = 8
PACK_WINDOW = 2048  # consecutive instances packed together
_HEADER = struct.Struct("<4i")  # tokens, num_a, is_random_next, predictions


def predictions_per_row(max_seq_length: int, max_predictions_per_seq: int,
                        pack_instances: int, masked_lm_prob: float) -> int:
  """The masked-LM slots of a packed row: min(N * max_predictions_per_seq,
  floor(masked_lm_prob * max_seq_length) + N).

  An instance of n tokens gets at most max(1, round(n * masked_lm_prob)) <=
  n * masked_lm_prob + 1 predictions, so a row of at most max_seq_length
  tokens and N instances never needs more; the slots of a model's masked-LM
  head (its largest layer) stay about those of one unpacked row.

  >>> predictions_per_row(512, 76, 8, 0.15), predictions_per_row(128, 20, 3, 0.15)
  (84, 22)
  """
  bound = math.floor(masked_lm_prob * max_seq_length + 1e-9) + pack_instances
  return min(max_predictions_per_seq * pack_instances, bound)


# ---------------------------------------------------------------- compact instances

def compact_instance(tokens, num_a: int, is_random_next: bool, positions, labels) -> bytes:
  """One finished instance as int32 bytes: header (tokens, num_a,
  is_random_next, predictions), tokens, positions, labels (`read_compact`
  reads windows of them back).

  >>> np.frombuffer(compact_instance([1, 5, 2, 6, 2], 3, True, [1], [9]), "<i4").tolist()
  [5, 3, 1, 1, 1, 5, 2, 6, 2, 1, 9]
  """
  return (_HEADER.pack(len(tokens), num_a, int(bool(is_random_next)), len(positions))
          + np.asarray(tokens, "<i4").tobytes() + np.asarray(positions, "<i4").tobytes()
          + np.asarray(labels, "<i4").tobytes())


class CompactInstanceEncoder:
  """The tasks' record encoder when rows are packed: compact instances.

  Takes what `records.BertRecordEncoder` takes (`encode`, `encode_parts`,
  `encode_arrays`), so the tasks run unchanged; `schema` is the packed
  rows' (what the metadata names).
  """

  def __init__(self, max_seq_length: int, max_predictions_per_seq: int,
               predictions_per_row_: int, pack_instances: int, v2_names: bool = False):
    self.schema = S.packed_schema(max_seq_length, predictions_per_row_, pack_instances,
                                  v2_names)
    self._seq, self._pred = max_seq_length, max_predictions_per_seq

  def encode(self, inst: Instance) -> bytes:
    return self.encode_parts(inst.tokens, inst.num_a, inst.is_random_next, inst.positions,
                             inst.labels)

  def encode_parts(self, tokens, num_a, is_random_next, positions, labels) -> bytes:
    if len(tokens) > self._seq or len(positions) > self._pred:
      raise ValueError(f"instance of {len(tokens)} tokens / {len(positions)} predictions "
                       f"exceeds {self._seq} / {self._pred}")
    return compact_instance(tokens, num_a, is_random_next, positions, labels)

  def encode_arrays(self, ids, lengths, num_as, is_random_next, positions, labels,
                    counts) -> list:
    """As `records.BertRecordEncoder.encode_arrays`."""
    return [compact_instance(ids[i, :n], na, rnd, positions[i, :m], labels[i, :m])
            for i, (n, na, rnd, m) in enumerate(zip(np.asarray(lengths).tolist(), list(num_as),
                                                    list(is_random_next),
                                                    np.asarray(counts).tolist()))]


# ---------------------------------------------------------------- the packing

def pack_lengths(lengths: Sequence[int], max_seq_length: int,
                 max_per_row: int) -> List[List[int]]:
  """Groups items into rows of at most `max_seq_length` tokens and `max_per_row` items.

  Best-fit decreasing (the histogram packing of Graphcore's SPFHP, one item
  at a time): items are taken longest first (ties: lower index first), each
  into the open row whose free space is the smallest that fits it (ties: the
  older row), else into a new row. Deterministic; O(n log n) plus the moves
  of a sorted list of the open rows.

  Args:
    lengths: each item's length (at most max_seq_length).
    max_seq_length: a row's capacity.
    max_per_row: at most this many items per row.
  Returns:
    The rows as lists of item indexes, each ascending; rows ordered by their
    first item.

  Example: lengths 5, 3, 4, 2, 4 in rows of 8, at most 2 per row:
    >>> pack_lengths([5, 3, 4, 2, 4], 8, 2)
    [[0, 1], [2, 4], [3]]
  """
  rows: List[List[int]] = []
  free: List[tuple] = []  # (free space, row) of rows with room for another item
  for i in sorted(range(len(lengths)), key=lambda k: (-lengths[k], k)):
    n = lengths[i]
    at = bisect.bisect_left(free, (n, -1))
    if at == len(free):
      row, space = len(rows), max_seq_length
      rows.append([])
    else:
      space, row = free.pop(at)
    rows[row].append(i)
    if len(rows[row]) < max_per_row and space - n > 0:
      bisect.insort(free, (space - n, row))
  for members in rows:
    members.sort()
  rows.sort(key=lambda members: members[0])
  return rows


class RowPacker:
  """Compact instances in their final order -> encoded packed rows.

  Args:
    max_seq_length: the row's length.
    predictions_per_row_: its masked-LM slots (`predictions_per_row`); a row
      whose instances hold more raises ValueError (the bound makes it
      impossible).
    pack_instances: at most this many instances per row.

  Example (two instances of 5 and 3 tokens share a row of 8):
    >>> from textrecords.wire import example_decoder
    >>> p = RowPacker(8, 2, 2)
    >>> rows = p.pack_records([compact_instance([1, 5, 2, 6, 2], 3, False, [1], [7]),
    ...                        compact_instance([1, 2, 2], 2, True, [], [])])
    >>> row = example_decoder.decode_example(rows[0])
    >>> row["instance_ids"], row["position_ids"], row["next_sentence_labels"]
    ([1, 1, 1, 1, 1, 2, 2, 2], [0, 1, 2, 3, 4, 0, 1, 2], [0, 1])
  """

  def __init__(self, max_seq_length: int, predictions_per_row_: int, pack_instances: int,
               v2_names: bool = False, window: int = PACK_WINDOW):
    self.seq, self.bound, self.n = max_seq_length, predictions_per_row_, pack_instances
    self.window = window
    self.encoder = records.PackedRecordEncoder(max_seq_length, predictions_per_row_,
                                               pack_instances, v2_names)

  def pack_records(self, compact: Sequence[bytes]) -> List[bytes]:
    """The encoded rows of compact instances, packed a window at a time."""
    out = []
    for w0 in range(0, len(compact), self.window):
      out.extend(self.encoder.encode_rows(self.pack_window(compact[w0:w0 + self.window])))
    return out

  def pack_window(self, compact: Sequence[bytes]) -> records.PackedWindow:
    """One window's instances (`read_compact`), its rows (`pack_lengths`) and
    their masked-LM positions (raises ValueError if a row holds more than
    the bound)."""
    words, starts, (lengths, num_as, rnd, counts) = read_compact(compact)
    rows = pack_lengths(lengths.tolist(), self.seq, self.n)
    order = np.fromiter(itertools.chain.from_iterable(rows), np.int64, len(lengths))
    sizes = np.fromiter(map(len, rows), np.int64, len(rows))
    firsts = np.cumsum(sizes) - sizes
    predictions = np.add.reduceat(counts[order], firsts) if len(rows) else firsts
    if predictions.max(initial=0) > self.bound:
      raise ValueError(f"a row's instances hold more than {self.bound} predictions")
    ends = np.cumsum(lengths[order])  # token offsets in the rows laid end to end
    offset = ends - lengths[order]
    offset -= np.repeat(offset[firsts], sizes)  # each instance's first token in its row
    labels_at = starts + lengths + counts  # positions first, then labels
    return records.PackedWindow(
        words, rows, starts, lengths, num_as, counts, labels_at, rnd,
        _gather(words, (starts + lengths)[order], counts[order], offset), predictions)


def read_compact(compact: Sequence[bytes]):
  """(int32 words of the instances end to end, each one's first token's index
  in them, (lengths, num_as, is_random_next, counts)) of compact instances.

  >>> words, starts, head = read_compact([compact_instance([1, 2], 1, True, [1], [7]),
  ...                                     compact_instance([1, 5, 2], 2, False, [], [])])
  >>> words[starts].tolist(), [h.tolist() for h in head]
  ([1, 1], [[2, 3], [1, 2], [1, 0], [1, 0]])
  """
  words = np.frombuffer(b"".join(compact), "<i4")
  sizes = np.fromiter(map(len, compact), np.int64, len(compact)) // 4
  heads = np.cumsum(sizes) - sizes
  head = words[heads[:, None] + np.arange(4)].astype(np.int64).T
  return words, heads + 4, tuple(head)


def _gather(words: np.ndarray, at: np.ndarray, counts: np.ndarray, plus: np.ndarray):
  """words[at[i]:at[i] + counts[i]] + plus[i] for every i, end to end (int64)."""
  total = int(counts.sum())
  firsts = np.cumsum(counts) - counts
  index = np.repeat(at - firsts, counts) + np.arange(total)
  return words[index].astype(np.int64) + np.repeat(plus, counts)


# ---------------------------------------------------------------- reading rows back

def unpack_row(features: dict, max_predictions_per_seq: Optional[int] = None) -> List[dict]:
  """The instances of one decoded packed row, each as an unpacked record's features.

  Args:
    features: canonical feature name -> list of values (one decoded row).
    max_predictions_per_seq: the per-instance bound the run was made with,
      to pad the masked-LM features to (default: no padding).
  Returns:
    Per instance, in row order: input_ids, input_mask, segment_ids (padded
    to the row's length), masked_lm_positions (relative to the instance),
    masked_lm_ids, masked_lm_weights (padded to max_predictions_per_seq)
    and next_sentence_labels: the features `bert_schema` records hold.

  >>> row = {S.INPUT_IDS: [1, 5, 2, 1, 2, 0], S.SEGMENT_IDS: [0, 0, 1, 0, 0, 0],
  ...        S.INSTANCE_IDS: [1, 1, 1, 2, 2, 0], S.MASKED_LM_POSITIONS: [1, 0],
  ...        S.MASKED_LM_IDS: [9, 0], S.MASKED_LM_WEIGHTS: [1.0, 0.0],
  ...        S.NEXT_SENTENCE_LABELS: [1, 0]}
  >>> [(i[S.INPUT_IDS], i[S.MASKED_LM_POSITIONS], i[S.NEXT_SENTENCE_LABELS])
  ...  for i in unpack_row(row, 1)]
  [([1, 5, 2, 0, 0, 0], [1], [1]), ([1, 2, 0, 0, 0, 0], [0], [0])]
  """
  inst = np.asarray(features[S.INSTANCE_IDS], np.int64)
  seq = len(inst)
  ids, seg = np.asarray(features[S.INPUT_IDS]), np.asarray(features[S.SEGMENT_IDS])
  used = np.asarray(features[S.MASKED_LM_WEIGHTS]) > 0
  positions = np.asarray(features[S.MASKED_LM_POSITIONS], np.int64)[used]
  labels = np.asarray(features[S.MASKED_LM_IDS], np.int64)[used]
  out = []
  for k in range(1, int(inst.max(initial=0)) + 1):
    where = np.flatnonzero(inst == k)
    start, n = int(where[0]), len(where)
    mine = (positions >= start) & (positions < start + n)
    m = int(mine.sum())
    pad_seq, pad_pred = [0] * (seq - n), [0] * ((max_predictions_per_seq or m) - m)
    out.append({
        S.INPUT_IDS: ids[start:start + n].tolist() + pad_seq,
        S.INPUT_MASK: [1] * n + pad_seq,
        S.SEGMENT_IDS: seg[start:start + n].tolist() + pad_seq,
        S.MASKED_LM_POSITIONS: (positions[mine] - start).tolist() + pad_pred,
        S.MASKED_LM_IDS: labels[mine].tolist() + pad_pred,
        S.MASKED_LM_WEIGHTS: [1.0] * m + [0.0] * len(pad_pred),
        S.NEXT_SENTENCE_LABELS: [int(features[S.NEXT_SENTENCE_LABELS][k - 1])],
    })
  return out


def attention_mask(instance_ids):
  """(B, L) instance ids -> (B, L, L) bool: query i may attend to key j.

  True exactly where both tokens belong to the same instance (padding, id 0,
  attends to nothing and is attended by nothing). Takes numpy arrays or TF
  tensors and returns the same kind.

  >>> attention_mask(np.array([[1, 1, 2, 0]]))[0].astype(int).tolist()
  [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]]
  """
  query, key = instance_ids[:, :, None], instance_ids[:, None, :]
  return (query == key) & (key > 0)
