"""Instance -> serialized tf.train.Example (pure Python, byte-stable, fast).

Features are written in schema order (the reference's order), so our bytes
equal the reference's when it runs with the pure-Python protobuf backend.

Speed: every header byte of a feature's map entry depends only on the length
of its packed payload, so headers are cached per length and a record is one
`bytes.join` of headers and payloads. Ids come from a varint table; masks,
segments, weights and padding are zero-copy slices of one run of ones and one
run of zeros, so memory grows linearly in `max_seq_length` (a table per
length would grow with its square; BENCHMARKS.md has the measurements).
"""

import struct
from typing import NamedTuple, Sequence

import numpy as np

from bert_data import schema as S
from bert_data.instances import Instance
from textrecords.wire import example_encoder
from textrecords.wire import features as F
from textrecords.wire import varint

_ONE_F32 = struct.pack("<f", 1.0)
_ZERO_F32 = struct.pack("<f", 0.0)


class _EntryHeaders(dict):
  """payload length -> bytes of a map entry up to its packed payload."""

  def __init__(self, spec: F.FeatureSpec):
    super().__init__()
    self._spec = spec

  def __missing__(self, length: int) -> bytes:
    marker = b"\x00" * length
    wrap = (example_encoder.float_feature_from_payload if self._spec.dtype == F.FLOAT
            else example_encoder.int64_feature_from_payload)
    entry = example_encoder.ExampleEncoder((self._spec,), "schema").encode_features(
        {self._spec.name: wrap(marker)})
    # entry = example header + map entry; keep only the map entry's prefix.
    prefix = entry[:len(entry) - length]
    _, pos = varint.decode(prefix, 1)
    self[length] = prefix[pos:]
    return self[length]


class _Runs:
  """Zero-copy slices of one run of a repeated unit (`bytes.join` takes them).

  >>> ones = _Runs(b"\\x01", 4)
  >>> b"".join((ones[3], _Runs(b"\\x00", 4)[1]))
  b'\\x01\\x01\\x01\\x00'
  """

  def __init__(self, unit: bytes, count: int):
    self._unit = len(unit)
    self._view = memoryview(unit * count)

  def __getitem__(self, count: int) -> memoryview:
    return self._view[:count * self._unit]


class _SequenceParts:
  """The parts both encoders write whole: input_mask, segment_ids and
  next_sentence_labels (entry header + payload), from `self._hdr`."""

  def _init_sequence_parts(self, seq: int, next_sentence: bool):
    self._seq = seq
    self._mask_hdr = self._hdr[S.INPUT_MASK][seq]
    self._seg_hdr = self._hdr[S.SEGMENT_IDS][seq]
    self._ones, self._zeros = _Runs(b"\x01", seq), _Runs(b"\x00", seq)
    # Without the label feature (packed records) the label writes nothing.
    self._nsp = ([self._hdr[S.NEXT_SENTENCE_LABELS][1] + bytes([v]) for v in (0, 1)]
                 if next_sentence else [b"", b""])

  def _mask(self, n: int) -> tuple:
    """input_mask's entry for `n` real tokens, as parts for `bytes.join`."""
    return self._mask_hdr, self._ones[n], self._zeros[self._seq - n]

  def _segments(self, num_a: int, n: int) -> tuple:
    """segment_ids' entry for `num_a` A tokens of `n`, as parts for `bytes.join`."""
    zeros = self._zeros
    return self._seg_hdr, zeros[num_a], self._ones[n - num_a], zeros[self._seq - n]


class BertRecordEncoder(_SequenceParts):
  """Encodes Instances for given lengths and vocab size.

  Example:
    >>> from textrecords.wire import example_decoder
    >>> enc = BertRecordEncoder(8, 2, 100)
    >>> rec = enc.encode(Instance([1, 5, 2, 6, 2], 3, True, [1], [9]))
    >>> example_decoder.decode_example(rec)["segment_ids"]
    [0, 0, 0, 1, 1, 0, 0, 0]
  """

  def __init__(self, max_seq_length: int, max_predictions_per_seq: int, vocab_size: int,
               v2_names: bool = False, next_sentence: bool = True):
    self.schema = S.bert_schema(max_seq_length, max_predictions_per_seq, v2_names,
                                next_sentence)
    self._seq = max_seq_length
    self._pred = max_predictions_per_seq
    self._table = varint.table(max(vocab_size, max_seq_length) + 1)
    # Keyed by the canonical names, whatever names the records carry.
    canonical = S.bert_schema(max_seq_length, max_predictions_per_seq,
                              next_sentence=next_sentence)
    self._hdr = {c.name: _EntryHeaders(s) for c, s in zip(canonical, self.schema)}
    self._init_sequence_parts(max_seq_length, next_sentence)
    seq, pred = max_seq_length, max_predictions_per_seq
    self._w_hdr = self._hdr[S.MASKED_LM_WEIGHTS][4 * pred]
    self._w_ones, self._w_zeros = _Runs(_ONE_F32, pred), _Runs(_ZERO_F32, pred)
    self._pad = _Runs(b"\x00", max(seq, pred))

  def _weights(self, m: int) -> tuple:
    """masked_lm_weights' entry for `m` predictions, as parts for `bytes.join`."""
    return self._w_hdr, self._w_ones[m], self._w_zeros[self._pred - m]

  def encode(self, inst: Instance) -> bytes:
    """The serialized Example of one instance (raises ValueError if too long)."""
    return self.encode_parts(inst.tokens, inst.num_a, inst.is_random_next,
                             inst.positions, inst.labels)

  def encode_parts(self, tokens, num_a, is_random_next, positions, labels) -> bytes:
    """As `encode`, from the instance's fields."""
    table, pad = self._table, self._pad
    n, m = len(tokens), len(positions)
    if n > self._seq or m > self._pred:
      raise ValueError(f"instance of {n} tokens / {m} predictions exceeds "
                       f"{self._seq} / {self._pred}")
    ids = b"".join([table[t] for t in tokens]) + pad[self._seq - n]
    pred_pad = pad[self._pred - m]
    pos = b"".join([table[p] for p in positions]) + pred_pad
    lab = b"".join([table[t] for t in labels]) + pred_pad
    hdr = self._hdr
    body = b"".join((
        hdr[S.INPUT_IDS][len(ids)], ids,
        *self._mask(n),
        *self._segments(num_a, n),
        hdr[S.MASKED_LM_POSITIONS][len(pos)], pos,
        hdr[S.MASKED_LM_IDS][len(lab)], lab,
        *self._weights(m),
        self._nsp[1 if is_random_next else 0],
    ))
    return b"\x0a" + varint.encode(len(body)) + body

  def encode_arrays(self, ids, lengths, num_as, is_random_next, positions, labels,
                    counts) -> list:
    """Serialized Examples for a batch given as arrays (see `masking.mask_batch`).

    Varints of all ids, positions and labels are packed in one set of numpy
    operations; each record is then one `bytes.join`.
    """
    seq, pred = self._seq, self._pred
    data, nbytes = _varints(np.concatenate([ids, positions, labels], axis=1))
    ends = np.cumsum(np.stack([nbytes[:, :seq].sum(axis=1),
                               nbytes[:, seq:seq + pred].sum(axis=1),
                               nbytes[:, seq + pred:].sum(axis=1)], axis=1).ravel())
    bounds = [0] + ends.tolist()
    hdr = self._hdr
    ids_h, pos_h, lab_h = hdr[S.INPUT_IDS], hdr[S.MASKED_LM_POSITIONS], hdr[S.MASKED_LM_IDS]
    mask, segments, weights, nsp = self._mask, self._segments, self._weights, self._nsp
    out = []
    encode_len = varint.encode
    for i, (n, na, rnd, m) in enumerate(zip(lengths.tolist(), list(num_as),
                                            list(is_random_next), counts.tolist())):
      a, b, c, d = bounds[3 * i:3 * i + 4]
      body = b"".join((
          ids_h[b - a], data[a:b],
          *mask(n),
          *segments(na, n),
          pos_h[c - b], data[b:c],
          lab_h[d - c], data[c:d],
          *weights(m),
          nsp[1 if rnd else 0],
      ))
      out.append(b"\x0a" + encode_len(len(body)) + body)
    return out


def _varints(values: np.ndarray):
  """Packed varints of a non-negative int matrix (values < 2**21), row-major.

  Returns (bytes, per-element byte counts).

  >>> data, nb = _varints(np.array([[1, 300], [0, 20000]]))
  >>> data.hex(), nb.tolist()
  ('01ac0200a09c01', [[1, 2], [1, 3]])
  """
  v = np.asarray(values, np.int64)
  if v.size and (v.min() < 0 or v.max() >= 1 << 21):
    raise ValueError("ids must be in [0, 2**21)")
  nbytes = varint.lengths(v)
  return varint.pack(v, nbytes).tobytes(), nbytes


def _varints_with_offsets(values: np.ndarray, chunk: int = 16384):
  """(packed varints of a 1-D non-negative int array (values < 2**21), where
  each value's varint starts: n + 1 offsets, the last one the end).

  Done `chunk` values at a time: small temporaries are reused by the
  allocator, where whole-array ones cost page faults (3x slower on 600k ids).

  >>> data, at = _varints_with_offsets(np.array([1, 300, 0, 20000]), chunk=3)
  >>> data.hex(), at.tolist()
  ('01ac0200a09c01', [0, 1, 3, 4, 7])
  """
  parts, offsets, end = [], [np.zeros(1, np.int64)], 0
  for c0 in range(0, len(values), chunk):
    data, nbytes = _varints(values[c0:c0 + chunk])
    parts.append(data)
    ends = np.cumsum(nbytes, dtype=np.int64)
    ends += end
    offsets.append(ends)
    end = int(ends[-1])
  return b"".join(parts), np.concatenate(offsets)


class DynamicRecordEncoder(_SequenceParts):
  """Encodes unmasked instances (`--masking=dynamic`) from arrays.

  Features (`schema.dynamic_schema`): input_ids, input_mask, segment_ids,
  next_sentence_labels, record_key (the instance's 64-bit order key, read
  back as int64; it seeds the instance's masks in `make_dataset`) and, for
  whole-word masking, word_starts.

  Example:
    >>> from textrecords.wire import example_decoder
    >>> enc = DynamicRecordEncoder(8, whole_word=False)
    >>> rec = enc.encode_arrays(np.array([[1, 5, 2, 6, 2, 0, 0, 0]]), np.array([5]), [3],
    ...                         [True], np.array([7], np.uint64))[0]
    >>> ex = example_decoder.decode_example(rec)
    >>> ex["segment_ids"], ex["record_key"], ex["next_sentence_labels"]
    ([0, 0, 0, 1, 1, 0, 0, 0], [7], [1])
  """

  def __init__(self, max_seq_length: int, whole_word: bool, v2_names: bool = False,
               next_sentence: bool = True):
    self.schema = S.dynamic_schema(max_seq_length, whole_word, v2_names, next_sentence)
    canonical = S.dynamic_schema(max_seq_length, whole_word, next_sentence=next_sentence)
    self._hdr = {c.name: _EntryHeaders(s) for c, s in zip(canonical, self.schema)}
    self._whole_word = whole_word
    self._init_sequence_parts(max_seq_length, next_sentence)

  def encode_arrays(self, ids, lengths, num_as, is_random_next, keys,
                    starts=None) -> list:
    """Serialized Examples: ids (B, seq) zero-padded, lengths (B,), keys
    (B,) uint64, starts (B, seq) 0/1 (whole-word records only)."""
    seq = self._seq
    data, nbytes = _varints(np.asarray(ids, np.int64))
    ends = np.cumsum(nbytes.sum(axis=1))
    bounds = [0] + ends.tolist()
    hdr = self._hdr
    ids_h, key_h = hdr[S.INPUT_IDS], hdr[S.RECORD_KEY]
    ws_h = hdr[S.WORD_STARTS][seq] if self._whole_word else b""
    ws_rows = (np.asarray(starts, np.uint8).tobytes() if self._whole_word else b"")
    encode_varint = varint.encode
    mask, segments, nsp = self._mask, self._segments, self._nsp
    out = []
    for i, (n, na, rnd, key) in enumerate(zip(np.asarray(lengths).tolist(), list(num_as),
                                              list(is_random_next),
                                              np.asarray(keys, np.uint64).tolist())):
      a, b = bounds[i], bounds[i + 1]
      k = encode_varint(key)
      parts = [ids_h[b - a], data[a:b], *mask(n), *segments(na, n),
               nsp[1 if rnd else 0], key_h[len(k)], k]
      if self._whole_word:
        parts += [ws_h, ws_rows[i * seq:(i + 1) * seq]]
      body = b"".join(parts)
      out.append(b"\x0a" + encode_varint(len(body)) + body)
    return out


class PackedRecordEncoder:
  """Encodes packed rows (`--pack_instances=N`) from a window of compact instances.

  Features (`schema.packed_schema`) are written in schema order, each row
  one `bytes.join` of cached headers and zero-copy slices: the varints of
  all the window's words come from one numpy pass (an instance's tokens and
  labels are slices of it), the row's masked-LM positions from another;
  segment_ids, instance_ids, position_ids, the masks and the weights are
  slices of constant runs (a varint ramp 0, 1, ... for position_ids). The
  bytes equal those of the rows written out whole, zero-padded.

  Example (two instances of 2 tokens in a row of 4):
    >>> from textrecords.wire import example_decoder
    >>> enc = PackedRecordEncoder(4, 1, 2)
    >>> words = np.array([1, 2, 9, 1, 2], np.int32)  # tokens 1 2, label 9, tokens 1 2
    >>> rec = enc.encode_rows(PackedWindow(words, [[0, 1]], starts=[0, 3], lengths=[2, 2],
    ...     num_as=[1, 1], counts=[1, 0], labels_at=[2, 5], is_random_next=[0, 1],
    ...     positions=np.array([1]), predictions=[1]))[0]
    >>> f = example_decoder.decode_example(rec)
    >>> f["position_ids"], f["instance_ids"], f["masked_lm_ids"], f["next_sentence_labels"]
    ([0, 1, 0, 1], [1, 1, 2, 2], [9], [0, 1])
  """

  def __init__(self, max_seq_length: int, predictions_per_row: int, pack_instances: int,
               v2_names: bool = False):
    self.schema = S.packed_schema(max_seq_length, predictions_per_row, pack_instances,
                                  v2_names)
    canonical = S.packed_schema(max_seq_length, predictions_per_row, pack_instances)
    self._names = [s.name for s in canonical]
    self._hdr = {c.name: _EntryHeaders(s) for c, s in zip(canonical, self.schema)}
    self._seq, self._bound, self._n = max_seq_length, predictions_per_row, pack_instances
    # Constant runs as memoryviews, sliced without a call (floats: 4 bytes each).
    self._ones = memoryview(b"\x01" * max_seq_length)
    self._zeros = memoryview(bytes(max(max_seq_length, predictions_per_row, pack_instances)))
    self._ids = [memoryview(bytes([k + 1]) * max_seq_length) for k in range(pack_instances)]
    ramp, ramp_bytes = _varints(np.arange(max_seq_length)[None])
    self._ramp = memoryview(ramp)
    self._ramp_end = [0] + np.cumsum(ramp_bytes).tolist()  # bytes of the ramp 0..n-1
    self._f_ones = memoryview(_ONE_F32 * max(predictions_per_row, pack_instances))
    self._f_zeros = memoryview(_ZERO_F32 * max(predictions_per_row, pack_instances))
    # Each feature's header in schema order (a varint feature's: by its size).
    order = [S.INPUT_IDS, S.INPUT_MASK, S.SEGMENT_IDS, S.INSTANCE_IDS, S.POSITION_IDS,
             S.MASKED_LM_POSITIONS, S.MASKED_LM_IDS, S.MASKED_LM_WEIGHTS,
             S.NEXT_SENTENCE_LABELS, S.NEXT_SENTENCE_WEIGHTS]
    assert [s.name for s in canonical] == order, "packed_schema's order changed"
    hdr = self._hdr
    self._row_hdr = (hdr[S.INPUT_IDS], hdr[S.INPUT_MASK][max_seq_length],
                     hdr[S.SEGMENT_IDS][max_seq_length], hdr[S.INSTANCE_IDS][max_seq_length],
                     hdr[S.POSITION_IDS], hdr[S.MASKED_LM_POSITIONS], hdr[S.MASKED_LM_IDS],
                     hdr[S.MASKED_LM_WEIGHTS][4 * predictions_per_row],
                     hdr[S.NEXT_SENTENCE_LABELS][pack_instances],
                     hdr[S.NEXT_SENTENCE_WEIGHTS][4 * pack_instances])

  def encode_rows(self, window: "PackedWindow") -> list:
    """Serialized Examples of the window's rows, in `window.rows` order."""
    data, at = _varints_with_offsets(window.words)
    starts, lengths = np.asarray(window.starts), np.asarray(window.lengths)
    labels_at, counts = np.asarray(window.labels_at), np.asarray(window.counts)
    data = memoryview(data)
    tok_a, tok_b = at[starts].tolist(), at[starts + lengths].tolist()
    lab_a, lab_b = at[labels_at].tolist(), at[labels_at + counts].tolist()
    instances = [(data[ta:tb], data[la:lb], n, na, m, 1 if rnd else 0)
                 for ta, tb, la, lb, n, na, m, rnd in zip(
                     tok_a, tok_b, lab_a, lab_b, lengths.tolist(), list(window.num_as),
                     counts.tolist(), list(window.is_random_next))]
    pos_data, pos_at = _varints_with_offsets(np.asarray(window.positions))
    pos_data = memoryview(pos_data)
    row_ends = pos_at[np.cumsum(window.predictions)].tolist()
    out, a = [], 0
    for members, b in zip(window.rows, row_ends):
      body = b"".join(self._row_parts([instances[i] for i in members], pos_data[a:b]))
      out.append(b"\x0a" + varint.encode(len(body)) + body)
      a = b
    return out

  def _row_parts(self, instances: list, positions: memoryview) -> list:
    """The parts of one row's features, in schema order, for `bytes.join`.

    Args:
      instances: its instances' tuples of `encode_rows` (varints of tokens
        and of labels, length, num_a, predictions, label).
      positions: the varints of its masked-LM positions.
    """
    zeros, ones, ramp, ramp_end, ids_of = (self._zeros, self._ones, self._ramp, self._ramp_end,
                                           self._ids)
    ids, segs, inst, pos, labs, labels = [], [], [], [], [], []
    used = ids_size = pos_size = lab_size = m_row = 0
    for k, (tokens, masked, n, na, m, rnd) in enumerate(instances):
      ids.append(tokens)
      segs += (zeros[:na], ones[:n - na])
      inst.append(ids_of[k][:n])
      pos.append(ramp[:ramp_end[n]])
      labs.append(masked)
      labels.append(rnd)
      ids_size += len(tokens)
      pos_size += ramp_end[n]
      lab_size += len(masked)
      used += n
      m_row += m
    pad, m_pad, k_pad = self._seq - used, self._bound - m_row, self._n - len(instances)
    hdr, f_ones, f_zeros = self._row_hdr, self._f_ones, self._f_zeros
    return [
        hdr[0][ids_size + pad], *ids, zeros[:pad],
        hdr[1], ones[:used], zeros[:pad],
        hdr[2], *segs, zeros[:pad],
        hdr[3], *inst, zeros[:pad],
        hdr[4][pos_size + pad], *pos, zeros[:pad],
        hdr[5][len(positions) + m_pad], positions, zeros[:m_pad],
        hdr[6][lab_size + m_pad], *labs, zeros[:m_pad],
        hdr[7], f_ones[:4 * m_row], f_zeros[:4 * m_pad],
        hdr[8], bytes(labels), zeros[:k_pad],
        hdr[9], f_ones[:4 * len(instances)], f_zeros[:4 * k_pad],
    ]


class PackedWindow(NamedTuple):
  """A window of compact instances and its rows, as `PackedRecordEncoder` takes them.

  Attributes:
    words: the instances' int32 words (non-negative, below 2**21).
    rows: per row, its instances' indexes in row order.
    starts, lengths: instance i's tokens are words[starts[i]:starts[i] + lengths[i]].
    num_as: tokens of segment A (with [CLS] and the first [SEP]) per instance.
    counts, labels_at: its masked-LM labels are words[labels_at[i]:labels_at[i] + counts[i]].
    is_random_next: its next-sentence (or sentence-order) label.
    positions: the masked-LM positions of all rows, in row order, relative
      to the row (at most the bound per row: the caller checks).
    predictions: the number of them in each row.
  """
  words: np.ndarray
  rows: Sequence[Sequence[int]]
  starts: Sequence[int]
  lengths: Sequence[int]
  num_as: Sequence[int]
  counts: Sequence[int]
  labels_at: Sequence[int]
  is_random_next: Sequence[int]
  positions: np.ndarray
  predictions: Sequence[int]
