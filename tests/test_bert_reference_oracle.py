"""Reference-compatible mode equals an independent oracle on generated corpora.

The goldens pin three flag sets on one corpus; this checks many corpora
(several files, documents spanning files, blank and whitespace-only lines,
CRLF, accents, CJK, punctuation, long words) and flag sets against
`tests/reference_bert.py`, a plain implementation written from the spec.
"""

import random

import pytest

from bert_data import generator
from bert_data.config import BertConfig
from conftest import SAMPLE_TEXT, VOCAB
from reference_bert import reference_records
from textrecords.files import tfrecord
from textrecords.wire import example_decoder

WORDS = open(SAMPLE_TEXT, encoding="utf-8").read().split() + [
    "Café", "naïve", "Zürich", "東京", "日本語", "«quoted»", "—", "x" * 150, "y" * 210,
    "Ωmega", "ΟΔΟΣ.", "don't", "e-mail", "3.14", "##hash", "[CLS]", "[MASK]"]


def _corpus(tmp_path, seed):
  rng = random.Random(seed)
  paths = []
  for f in range(rng.randint(1, 3)):
    lines = []
    for _ in range(rng.randint(1, 8)):
      for _ in range(rng.randint(1, 12)):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40))))
        if rng.random() < 0.05:
          lines.append("   \t ")  # whitespace-only: a document break
      lines.append("")
    if rng.random() < 0.5:
      lines.pop()  # the last document runs into the next file
    eol = "\r\n" if rng.random() < 0.3 else "\n"
    path = tmp_path / f"part{f}.txt"
    path.write_bytes(eol.join(lines).encode("utf-8") + (eol.encode() if rng.random() < 0.7 else b""))
    paths.append(str(path))
  return paths


FLAG_SETS = [
    dict(max_seq_length=128, max_predictions_per_seq=20, masked_lm_prob=0.15, short_seq_prob=0.1,
         do_whole_word_mask=False, dupe_factor=2),
    dict(max_seq_length=32, max_predictions_per_seq=5, masked_lm_prob=0.3, short_seq_prob=0.5,
         do_whole_word_mask=True, dupe_factor=3),
    dict(max_seq_length=16, max_predictions_per_seq=0, masked_lm_prob=0.15, short_seq_prob=1.0,
         do_whole_word_mask=False, dupe_factor=1),
    dict(max_seq_length=64, max_predictions_per_seq=64, masked_lm_prob=1.0, short_seq_prob=0.0,
         do_whole_word_mask=True, dupe_factor=2),
]


@pytest.mark.parametrize("seed", range(16))
def test_reference_mode_equals_oracle(tmp_path, seed):
  flags = dict(FLAG_SETS[seed % len(FLAG_SETS)], random_seed=seed * 7 + 1,
               do_lower_case=seed % 5 != 4)
  paths = _corpus(tmp_path, seed)
  want = reference_records(paths, VOCAB, flags)
  out = str(tmp_path / "out.tfrecord")
  cfg = BertConfig(input_files=tuple(paths), output_files=(out,), vocab_file=VOCAB,
                   reference_compatible=True, num_workers=1 + seed % 2,
                   **{k: v for k, v in flags.items()})
  generator.create(cfg)
  got = [example_decoder.decode_example(r) for r in tfrecord.read_records(out)]
  assert len(got) == len(want) > 0
  for i, (g, w) in enumerate(zip(got, want)):
    assert g == w, f"record {i} differs"
