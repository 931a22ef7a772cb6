"""w2v_data's centers in tf.data, in the read order of `textrecords.reading.read_order`.

A w2v_data batch holds centers, not records (a sentence record holds many),
so the read order runs over centers: file i holds `file_centers` of them
(the metadata's), center numbers count them file after file, and step k of
an epoch is centers [kG, (k+1)G) of the epoch's stream (files permuted and
rotated, windows of `shuffle_buffer` centers permuted; see read_order).

Each center is a unit: (center number, parts), parts being the parsed
per-center tensors (skip-gram: center, dense row, n; CBOW / PV: the x dict).
Units come two ways, giving the same batches:
  held       every record parsed once into per-center tensors, kept by
             tf.data's in-memory cache; the order's center numbers gather
             a window of them at a time (drop_remainder: one pipeline
             for every epoch, a window's numbers computed in-graph and
             gathered in parallel with the next window's,
             `tf_order.plan_id_windows`; else `tf_order.plan_windows`).
             The graph holds the file names and parsing ops, not the rows.
  streamed   file i read and parsed into units (`tf_order.plan_dataset`
             then skips and takes units): a stream entering a file (a
             rotation, a resume) parses that file's records before its
             position, since the records' center counts are not stored.
"""

import os
from typing import Callable, List, Sequence

import numpy as np

from textrecords.reading import tf_input
from textrecords.reading import tf_order

PARSE_RECORDS = 256  # records parsed at a time by the streamed reader
PARSE_PIECES = 4  # HeldRows: records parsed in up to this many parts at once


def _starts(counts: Sequence[int]) -> np.ndarray:
  return np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))


class HeldRows:
  """Every record of `files` parsed once and held as per-center tensors.

  `parse` (serialized records -> (parts, centers per record)) is the
  streamed reader's own. The rows are not constants of the dataset's
  graph: a one-element dataset parses all records when first read and
  tf.data's in-memory `cache` keeps them for later iterators and epochs.
  """

  def __init__(self, tf, files: List[str], compression: str, parse: Callable,
               num_records: int):
    tf_input.check_readable_by_tf(files)
    self._tf = tf
    if num_records:  # one element: every record
      records = tf.data.TFRecordDataset(files, compression_type=compression or None,
                                        buffer_size=1 << 20).batch(num_records)
    else:
      records = tf.data.Dataset.from_tensors(tf.constant([], tf.string))
    pieces = min(PARSE_PIECES, os.cpu_count() or 1)
    self.rows = records.map(lambda s: _parsed_in_pieces(tf, s, parse, pieces)).cache()

  def windows(self, stream, epoch, first_window, redraw=None):
    """(center numbers, parts) of each window of `stream`'s `epoch` from
    `first_window` on (`tf_order.id_windows`): a window's rows gathered at
    once, in parallel with the next window's (then `redraw(epoch, numbers,
    parts)` -> parts, if given)."""
    tf = self._tf
    ids = tf_order.id_windows(tf, stream, epoch, first_window)

    def gather(ids, rows):
      parts = tf.nest.map_structure(lambda t: tf.gather(t, ids), rows)
      return ids, parts if redraw is None else redraw(tf.cast(epoch, tf.int64), ids, parts)

    return tf.data.Dataset.zip((ids, self.rows.repeat())).map(
        gather, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  def batches(self, plan, redraw=None):
    """The (epoch, (center numbers, parts)) per-replica batches of `plan`,
    every pass (`tf_order.plan_id_windows`: one pipeline for all epochs, a
    window's center numbers computed in-graph and its batches gathered at
    once, in parallel with the next window's); None without drop_remainder."""
    tf = self._tf
    b = plan.sharing.per_replica

    def shaped(t):  # (k * b, ...) -> (k, b, ...), keeping the static row shape
      out = tf.reshape(t, tf.concat([[-1, b], tf.shape(t)[1:]], 0))
      out.set_shape(tf.TensorShape([None, b]).concatenate(t.shape[1:]))
      return out

    def gather(e, ids, held):
      flat = tf.reshape(ids, [-1])
      parts = tf.nest.map_structure(lambda t: tf.gather(t, flat), held)
      if redraw is not None:
        parts = redraw(e, flat, parts)
      return ids, tf.nest.map_structure(shaped, parts)

    return tf_order.plan_id_windows(plan, gather, self.rows)


def _parsed_in_pieces(tf, serialized, parse: Callable, pieces: int):
  """parse(serialized)[0], the records parsed in `pieces` independent parts
  of one function (TF runs them on its inter-op threads at once) and
  concatenated: the same tensors, sooner on several cores. The graph has
  `pieces` parsers whatever the data's size."""
  if pieces == 1:
    return parse(serialized)[0]
  n = tf.size(serialized, out_type=tf.int64)
  bounds = [n * i // pieces for i in range(pieces + 1)]
  parts = [parse(serialized[a:b])[0] for a, b in zip(bounds, bounds[1:])]
  return tf.nest.map_structure(lambda *t: tf.concat(t, 0), *parts)


def streamed_reader(tf, files: List[str], compression: str, parse: Callable,
                    counts: Sequence[int]) -> Callable:
  """read_file(i): the units of file i (a Dataset of (center number, parts))."""
  tf_input.check_readable_by_tf(files)
  paths, starts = tf.constant(files), tf.constant(_starts(counts), tf.int64)

  def read_file(i):
    records = tf.data.TFRecordDataset(tf.gather(paths, i), compression_type=compression or None,
                                      buffer_size=1 << 20).batch(PARSE_RECORDS)
    parts = records.map(lambda s: parse(s)[0]).unbatch()
    return tf.data.Dataset.zip((tf.data.Dataset.range(starts[i], starts[i + 1]), parts))

  return read_file


def planned_units(tf, plan, held, read_file, redraw=None):
  """(epoch, (center numbers, parts)) per-replica batches of a `Plan` over
  centers: gathered from `held` (a HeldRows; `redraw(epoch, numbers,
  parts)` -> parts applied a window at a time), else read by `read_file`."""
  if held is not None:
    ds = held.batches(plan, redraw)
    if ds is None:
      ds = tf_order.plan_windows(plan, lambda e, j: held.windows(plan.stream, e, j, redraw))
  else:
    ds = tf_order.plan_dataset(plan, read_file)
  return tf_input.plan_cardinality(ds, plan)


def mixture_units(tf, mix, held: Sequence[HeldRows], counts: Sequence[Sequence[int]]):
  """(step, (dataset numbers, center numbers, parts)) per-replica batches of
  a `read_order.Mixture` of held datasets (their parts of one structure and
  widths)."""
  readers = []
  for cs in counts:
    starts = tf.constant(_starts(cs), tf.int64)
    readers.append(lambda i, s=starts: tf.data.Dataset.range(s[i], s[i + 1]))
  picks = tf_order.mixture_dataset(mix, readers)
  rows = tf.data.Dataset.zip(tuple(h.rows.repeat() for h in held))

  def gather(head, all_rows):
    step, which, ids = head
    out = None
    for d, rows_d in enumerate(all_rows):
      mine = tf.equal(which, d)
      got = tf.nest.map_structure(lambda t: tf.gather(t, tf.where(mine, ids, 0)), rows_d)
      out = got if out is None else tf.nest.map_structure(
          lambda a, b: tf.where(_expand(tf, mine, a), a, b), got, out)
    return step, (which, ids, out)

  ds = tf.data.Dataset.zip((picks, rows)).map(gather)
  return tf_input.with_cardinality(ds, None)


def _expand(tf, mask, like):
  """`mask` (B,) reshaped to broadcast over `like` (B, ...)."""
  return tf.reshape(mask, tf.concat([[-1], tf.ones([tf.rank(like) - 1], tf.int32)], 0))
