"""Dynamic masking: the masked-LM rule executed inside tf.data, per batch.

Records written with `--masking=dynamic` hold unmasked instances and a
per-record key (`schema.RECORD_KEY`). `make_dataset` draws each batch's masks
here, afresh every epoch, with the dataset's rule (`bert_data.masks`:
single pieces, whole words or n-grams, found in `masks.registry` from the
metadata) in its TensorFlow form; the TF-free readers run its numpy form
(`masking.dynamic_mask`) with the same numbers:

  * k = min(max_predictions_per_seq, max(1, round(n * masked_lm_prob))) of
    the n tokens of the instance ([CLS]/[SEP] included in n, never masked);
  * the rule chooses the positions;
  * each chosen position: [MASK] 80%, itself 10%, a random vocab id 10%.

Random numbers are counter-based and stateless (`masks.draws`): SplitMix64
of (record key mixed with the epoch's salt, stream, column), the generator
numpy uses in `textrecords.seeding.uniform_grid`, so numpy and TensorFlow
draw the same numbers (single-piece masks equal
`masks.single_piece.mask_matrix`'s bit for bit). The masks of a record
depend only on (its key, the epoch's salt): not on the batch, the shuffle
or the number of input pipelines.

Speed: the whole rule runs as one XLA-compiled function
(`tf.function(jit_compile=True)`: integer and exact float64 arithmetic, so
the bits stay numpy's); the word rules sort their words once outside XLA
and share the compiled 80/10/10 and compaction step (`masks.draws.finish`).
Each new batch shape compiles once (about a second).
"""

import dataclasses
from typing import Optional

import numpy as np

from bert_data import schema as S
from bert_data.masks import draws
from bert_data.masks import registry
from bert_data.masks import single_piece
from bert_data.masks import whole_word
from textrecords.errors import UserError
from textrecords.tf_import import require_tf


@dataclasses.dataclass(frozen=True)
class DynamicMasker:
  """The masking settings of a dynamic dataset (from its metadata).

  Attributes:
    max_seq_length: the records' length.
    max_predictions_per_seq, masked_lm_prob: the rule's k (overridable).
    whole_word: records carry word-start flags; mask whole words.
    max_ngram_size: N for n-gram masking (1: words or pieces).
    cls_id, sep_id, mask_id: special ids.
    random_ids: the pool of the 10% random replacements.
  """
  max_seq_length: int
  max_predictions_per_seq: int
  masked_lm_prob: float
  whole_word: bool
  max_ngram_size: int
  cls_id: int
  sep_id: int
  mask_id: int
  random_ids: tuple

  @property
  def rule(self):
    """The masking rule's module (`masks.registry`)."""
    return registry.rule_for(self.whole_word, self.max_ngram_size)

  def mask(self, features: dict, salt):
    """Masks one parsed batch.

    Args:
      features: parsed int64 tensors by canonical name: input_ids,
        input_mask, record_key and (whole words) word_starts.
      salt: the epoch's int64 scalar.
    Returns:
      (input_ids, masked_lm_positions, masked_lm_ids) int32 and
      masked_lm_weights float32; positions ascending, zero-padded to
      max_predictions_per_seq.
    """
    tf = require_tf()
    ids = features[S.INPUT_IDS]
    keys = draws.epoch_keys(tf, features[S.RECORD_KEY][:, 0], salt)
    starts = features.get(S.WORD_STARTS) if self.whole_word else None
    out_ids, positions, labels, weights = mask_batch(tf, ids, features[S.INPUT_MASK], keys,
                                                     self, starts)
    return out_ids, positions, labels, weights


def masker_from_metadata(meta: dict, masked_lm_prob: Optional[float] = None,
                         max_predictions_per_seq: Optional[int] = None) -> DynamicMasker:
  """The masker of a dynamic dataset, with `make_dataset`'s overrides checked."""
  m = meta["masking"]
  seq = int(meta["max_seq_length"])
  prob = m["masked_lm_prob"] if masked_lm_prob is None else masked_lm_prob
  maxp = m["max_predictions_per_seq"] if max_predictions_per_seq is None \
      else max_predictions_per_seq
  where = meta.get("_path", "records")
  if not isinstance(prob, (int, float)) or not 0.0 <= prob <= 1.0:
    raise UserError(f"masked_lm_prob={prob!r}: must be a probability in [0, 1]")
  if not isinstance(maxp, (int, np.integer)) or not 1 <= maxp <= seq:
    raise UserError(f"max_predictions_per_seq={maxp!r}: must be in [1, {seq}] "
                    f"(the max_seq_length of {where})")
  pool = m["random_ids"]
  pool = tuple(range(pool["range"])) if isinstance(pool, dict) else tuple(pool)
  rule = registry.rule_of_meta(m)
  return DynamicMasker(seq, int(maxp), float(prob), rule.WORDS,
                       int(m.get("max_ngram_size", 1)), int(m["cls_id"]), int(m["sep_id"]),
                       int(m["mask_id"]), pool)


def mask_batch(tf, ids, input_mask, keys, p: DynamicMasker, starts=None):
  """The rule on a batch: ids (B, L) int64, keys (B,) uint64 (epoch keys).

  Returns (ids with replacements, positions, labels (B, maxp) int32,
  weights (B, maxp) float32).
  """
  ids = tf.cast(ids, tf.int64)
  if not (p.rule.WORDS and starts is not None):
    return _compiled(p).single(ids, tf.cast(input_mask, tf.int64), keys)
  c = _compiled(p)
  input_mask = tf.cast(input_mask, tf.int64)
  starts = tf.cast(starts, tf.int64)
  by_priority = tf.argsort(c.word_priority(ids, input_mask, starts, keys), axis=1, stable=True)
  return c.words(ids, input_mask, starts, keys, by_priority)


class _Compiled:
  """The XLA-compiled parts of one masker's rule (compiled once per shape).

  Integer and exact float64 arithmetic only, so XLA gives the same bits as
  numpy; fused, the SplitMix64 grids and the selection cost a fraction of
  the separate TensorFlow ops (docs/benchmarks_history.md).
  """

  def __init__(self, p: DynamicMasker):
    tf = require_tf()
    finish = draws.finish
    self.single = tf.function(lambda ids, input_mask, keys: finish(
        tf, ids, single_piece.tf_choice(tf, ids, input_mask, keys, p), keys, p),
                              jit_compile=True)
    self.word_priority = tf.function(lambda ids, input_mask, starts, keys: whole_word.tf_priority(
        tf, ids, input_mask, starts, keys, p), jit_compile=True)
    rule = p.rule
    self.words = tf.function(lambda ids, input_mask, starts, keys, by_priority: finish(
        tf, ids, rule.tf_choice(tf, ids, input_mask, starts, keys, by_priority, p), keys, p),
                             jit_compile=True)


_COMPILED = {}


def _compiled(p: DynamicMasker) -> _Compiled:
  if p not in _COMPILED:
    _COMPILED[p] = _Compiled(p)
  return _COMPILED[p]
