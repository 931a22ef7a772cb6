"""w2v_data's pure pieces of work, called by its generator on every engine.

A range of consecutive sentences is sampled (`sample_chunk`: every draw keyed
by the sentence's global index) and encoded (`encode_batch`) the same way
whichever engine runs it; the counts and metadata are built here once.
"""

import os
from typing import List, Optional, Sequence

import numpy as np

from textrecords.wire import features
from textrecords.datasets import metadata
from textrecords.datasets import vocab as vocab_lib
from textrecords.errors import UserError
from w2v_data import records
from w2v_data import sampling
from w2v_data import schema

_MAX_KEYS = ("max_contexts",)
_SUM_KEYS = ("centers", "pairs", "subsampled_tokens", "records")


def sentence_starts(sentence: np.ndarray) -> np.ndarray:
  """Where each sentence's centers start (centers come sentence by sentence).

  >>> sentence_starts(np.array([4, 4, 7, 9, 9])).tolist()
  [0, 2, 3]
  """
  if len(sentence) == 0:
    return np.zeros(0, np.int64)
  return np.flatnonzero(np.r_[True, sentence[1:] != sentence[:-1]])


def encode_batch(batch: sampling.SkipGramBatch, num_noise_words: int,
                 layout: str = schema.DEFAULT_LAYOUT, model: str = schema.DEFAULT_MODEL,
                 with_starts: bool = False):
  """The framed records of a batch: one per center or one per sentence, in order.

  A pure function of the batch (the per-unit encoder every engine calls).
  with_starts: return (bytes, each record's start offset) instead of bytes.
  """
  n = len(batch.centers)
  k = num_noise_words
  if n == 0:
    return (b"", np.zeros(0, np.int64)) if with_starts else b""
  if layout == "center":
    return records.encode_int64_records([
        (schema.CENTER, batch.centers, np.ones(n, dtype=np.int64)),
        (schema.CONTEXTS, batch.contexts, batch.num_contexts),
        (schema.NEGATIVES, batch.negatives, k * batch.num_contexts),
    ], with_starts)
  first = sentence_starts(batch.sentence)  # one record per sentence
  per_sentence = np.diff(np.r_[first, n])
  contexts = np.add.reduceat(batch.num_contexts, first)
  if model == "skipgram":
    return records.encode_int64_records([
        (schema.CENTERS, batch.centers, per_sentence),
        (schema.NUM_CONTEXTS, batch.num_contexts, per_sentence),
        (schema.CONTEXTS, batch.contexts, contexts),
        (schema.NEGATIVES, batch.negatives, k * contexts),
    ], with_starts)
  feats = [(schema.CENTERS, batch.centers, per_sentence),
           (schema.NEGATIVES, batch.negatives, k * per_sentence)]
  if model != "pv_dbow":
    feats += [(schema.NUM_CONTEXTS, batch.num_contexts, per_sentence),
              (schema.CONTEXTS, batch.contexts, contexts)]
  if model in schema.PV_MODELS:
    feats.append((schema.DOC_ID, batch.sentence[first], np.ones(len(first), dtype=np.int64)))
  return records.encode_int64_records(feats, with_starts)


def sample_chunk(sampler: sampling.SkipGramSampler, ids: np.ndarray, lengths: np.ndarray,
                 first: int, layout: str, write: bool = True, with_starts: bool = False):
  """Samples sentences first, first+1, ... (their ids concatenated); returns
  (framed records, or None when not `write`; counts). with_starts: the
  records are (bytes, each record's start offset)."""
  batch = sampler.sample(ids, lengths, np.arange(first, first + len(lengths)),
                         with_negatives=write)
  data = (encode_batch(batch, sampler.num_noise_words, layout, sampler.model, with_starts)
          if write else None)
  counts = {"centers": len(batch.centers), "pairs": batch.num_pairs,
            "subsampled_tokens": batch.subsampled_tokens,
            # (not np.unique: its first call imports numpy.ma, ~10 ms a worker)
            "records": len(sentence_starts(batch.sentence)),
            "max_contexts": int(batch.num_contexts.max()) if len(batch.centers) else 0}
  return data, counts


def add_counts(totals: dict, counts: dict) -> dict:
  """Adds a chunk's counts into `totals` (sums, and the longest row)."""
  for k in _SUM_KEYS:
    totals[k] = totals.get(k, 0) + counts[k]
  for k in _MAX_KEYS:
    totals[k] = max(totals.get(k, 0), counts[k])
  return totals


def no_noise_error(path: str, line: int, vocab_size: int) -> UserError:
  return UserError(
      f"{path}:{line}: a center's contexts cover every one of the {vocab_size - 1} "
      "noise words, so no negative can be drawn; lower --min_freq or --max_window_size, or "
      "set --num_noise_words=0")


def text_unit(model: str) -> str:
  """What one input line is for `model`: "documents" (pv_*) or "sentences"."""
  return "documents" if model in schema.PV_MODELS else "sentences"


def counts_text(model: str, counts: dict, vocab_size: int) -> str:
  """The summary line's counts, in `model`'s units.

  pv_dbow has no context words (0 pairs): its examples are (document, word).

  >>> counts_text("pv_dbow", {"sentences": 47, "centers": 20, "pairs": 0}, 68)
  '47 documents, vocab 68, 20 (document, word) examples'
  >>> counts_text("skipgram", {"sentences": 3, "centers": 9, "pairs": 20}, 5)
  '3 sentences, vocab 5, 9 centers, 20 pairs'
  """
  return f"{counts['sentences']:,} {text_unit(model)}, vocab {vocab_size:,}, " + \
      examples_text(model, counts)


def examples_text(model: str, counts: dict) -> str:
  """What the records hold, in `model`'s units (the summary's and the
  progress line's words).

  >>> examples_text("pv_dbow", {"centers": 991, "pairs": 0})
  '991 (document, word) examples'
  >>> examples_text("cbow", {"centers": 9, "pairs": 20})
  '9 centers, 20 pairs'
  """
  if model == "pv_dbow":
    return f"{counts['centers']:,} (document, word) examples"
  return f"{counts['centers']:,} centers, {counts['pairs']:,} pairs"


def summary_counts(config, num_sentences: int, raw_tokens: int, num_tokens: int,
                   totals: dict) -> dict:
  """The metadata's counts."""
  k = config.num_noise_words
  return {
      "sentences": num_sentences,
      "raw_tokens": raw_tokens,
      "tokens": num_tokens,
      "subsampled_tokens": totals["subsampled_tokens"],
      "centers": totals["centers"],
      "records": totals["centers"] if config.layout == "center" else totals["records"],
      "pairs": totals["pairs"],
      "negatives": k * totals["pairs" if config.model == "skipgram" else "centers"],
      "max_contexts": totals["max_contexts"],
      "max_row_length": ((1 + k) * totals["max_contexts"] if config.model == "skipgram"
                         else 1 + k),
  }


def build_meta(config, fingerprint: dict, record_paths: Sequence[str],
               file_centers: Sequence[int], tokens: List[str], counts_arr: np.ndarray,
               vocab_bytes: bytes, counts: dict, infos: List[dict],
               doc_names: Optional[List[str]] = None, docs_bytes: bytes = b"") -> dict:
  """The metadata, files (with their roles) and split included."""
  k = config.num_noise_words
  meta = metadata.base_meta(schema.PACKAGE)
  meta.update({
      "schema": features.schema_to_json(schema.schema_for(config.model, config.layout)),
      "layout": config.layout,
      "model": config.model,
      "flags": config.output_flags(),
      "random_seed": config.random_seed,
      "fingerprint": fingerprint,
      "compression": config.compression,
      "file_centers": {os.path.basename(p): n for p, n in zip(record_paths, file_centers)},
      "vocab": {"file": schema.VOCAB_NAME, "size": len(tokens), "unk_id": 0,
                "sha256": vocab_lib.sha256_bytes(vocab_bytes),
                "counts": counts_arr.tolist()},
      "noise": {"power": sampling.NOISE_POWER, "num_noise_words": k,
                "per": "context" if config.model == "skipgram" else "center"},
      "counts": counts,
  })
  if doc_names is not None:
    meta["docs"] = {"file": schema.DOCS_NAME, "size": len(doc_names),
                    "sha256": vocab_lib.sha256_bytes(docs_bytes)}
  return metadata.set_files(meta, infos,
                            {schema.SPLIT: [os.path.basename(p) for p in record_paths]},
                            {schema.VOCAB_NAME: metadata.ROLE_VOCAB,
                             schema.DOCS_NAME: metadata.ROLE_VOCAB})
