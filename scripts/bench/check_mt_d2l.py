r"""Checks mt_data's arrays against d2l's MTFra arrays, token by token.

    python scripts/bench/check_mt_d2l.py --input_file=/path/to/fra.txt \
        [--num_train=512 --num_val=128 --num_steps=9 --min_freq=2]

The d2l side is an independent plain-Python re-implementation of d2l's
`MTFra` preprocessing (no d2l import, no mt_data code):
  * _preprocess on the whole file text: U+202F/U+00A0 -> ' ', lowercase,
    ' ' inserted before , . ! ? when the previous character (of the text
    before lowercasing) is not a space and the position is not 0;
  * _tokenize: line by line, stops when the line index exceeds
    num_train + num_val (so it keeps one pair more than asked), keeps lines
    with exactly 2 tab-separated parts, tokens = [t for t in
    f'{part} <eos>'.split(' ') if t];
  * arrays: pad_or_trim to num_steps with '<pad>'; the target row gets a
    leading '<bos>' (num_steps + 1 long), decoder input = row[:-1],
    label = row[1:]; valid_len = non-'<pad>' tokens of the source row.

mt_data's side: `mt_data.create` into a temporary folder, then
`mt_data.make_dataset(..., training=False)` arrays, decoded back to tokens
with the written vocabularies.

Vocabulary rule for the comparison (ids differ by design: d2l sorts its vocab
alphabetically, mt_data by count): a token is shown as '<unk>' in the d2l
matrices when it occurs fewer than min_freq times among the compared pairs'
full token sequences (source and target counted separately) -- the rule
mt_data uses over the pairs it writes. The report also counts the cells that
would differ under d2l's own rule (counts over its num_train + num_val + 1
trimmed/padded rows), for information.

Prints a JSON report; exit status 0 when every compared array matches.
"""

import collections
import json
import os
import sys
import tempfile
import time
from textrecords.runs import script_args

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"


# ---------------------------------------------------------------- d2l side
def d2l_preprocess(text):
  """d2l's MTFra._preprocess, re-implemented."""
  text = text.replace("\u202f", " ").replace("\xa0", " ")
  lowered = text.lower()
  pieces = []
  for i, ch in enumerate(lowered):
    if i > 0 and ch in ",.!?" and text[i - 1] != " ":
      pieces.append(" " + ch)
    else:
      pieces.append(ch)
  return "".join(pieces)


def d2l_tokenize(text, max_examples=None):
  """d2l's MTFra._tokenize, re-implemented (including its off-by-one)."""
  src, tgt = [], []
  for i, line in enumerate(text.split("\n")):
    if max_examples and i > max_examples:
      break
    parts = line.split("\t")
    if len(parts) == 2:
      src.append([t for t in f"{parts[0]} {EOS}".split(" ") if t])
      tgt.append([t for t in f"{parts[1]} {EOS}".split(" ") if t])
  return src, tgt


def d2l_token_arrays(src, tgt, num_steps):
  """Token matrices (source, decoder_input, label) and valid_len, as d2l builds them."""
  def pad_or_trim(seq):
    return seq[:num_steps] if len(seq) > num_steps else seq + [PAD] * (num_steps - len(seq))
  source = [pad_or_trim(s) for s in src]
  target = [[BOS] + pad_or_trim(t) for t in tgt]
  decoder_input = [row[:-1] for row in target]
  label = [row[1:] for row in target]
  valid_len = [sum(1 for tok in row if tok != PAD) for row in source]
  return {"source": source, "decoder_input": decoder_input, "label": label,
          "valid_len": valid_len}


def rare_tokens(sentences, min_freq):
  counts = collections.Counter(tok for s in sentences for tok in s)
  return {tok for tok, c in counts.items() if c < min_freq}


def mask_rare(arrays, src_rare, tgt_rare):
  """Shows rare tokens as <unk> (source rows by src_rare, target rows by tgt_rare)."""
  out = dict(arrays)
  out["source"] = [[UNK if t in src_rare else t for t in row] for row in arrays["source"]]
  for key in ("decoder_input", "label"):
    out[key] = [[UNK if t in tgt_rare else t for t in row] for row in arrays[key]]
  return out


def d2l_expected(raw_text, num_train, num_val, num_steps, min_freq):
  """d2l's token matrices for the first num_train + num_val pairs, rare tokens as <unk>.

  Returns (expected, info): expected[split] = arrays for "train" / "valid".
  """
  src, tgt = d2l_tokenize(d2l_preprocess(raw_text), num_train + num_val)
  kept = len(src)
  n = min(kept, num_train + num_val)
  arrays = d2l_token_arrays(src, tgt, num_steps)
  ours = mask_rare(arrays, rare_tokens(src[:n], min_freq), rare_tokens(tgt[:n], min_freq))
  # d2l's own vocab: counts over all its kept rows after pad_or_trim (+ <bos>).
  own = mask_rare(arrays, rare_tokens(arrays["source"], min_freq),
                  rare_tokens([[BOS] + r for r in arrays["label"]], min_freq))
  own_diff = sum(a != b for key in ("source", "label")
                 for ra, rb in zip(ours[key][:n], own[key][:n]) for a, b in zip(ra, rb))
  expected = {}
  for split, (lo, hi) in (("train", (0, min(num_train, n))), ("valid", (min(num_train, n), n))):
    expected[split] = {k: v[lo:hi] for k, v in ours.items()}
  info = {"d2l_pairs_kept": kept, "pairs_compared": n,
          "cells_differing_under_d2l_own_vocab_rule": own_diff}
  return expected, info


# ---------------------------------------------------------------- mt_data side
def mt_token_arrays(output_dir, split, num_steps):
  """mt_data's make_dataset arrays for a split, decoded to tokens."""
  import mt_data  # pylint: disable=import-outside-toplevel
  src_codec, tgt_codec = mt_data.load_codecs(output_dir)
  ds = mt_data.make_dataset(output_dir, 4096, split=split, num_steps=num_steps, training=False)
  out = {"source": [], "decoder_input": [], "label": [], "valid_len": [], "weight_ok": True}
  for x, y, w in ds:
    out["source"] += [src_codec.id_tokens(r) for r in x["source"].numpy().tolist()]
    out["decoder_input"] += [tgt_codec.id_tokens(r) for r in x["decoder_input"].numpy().tolist()]
    labels = [tgt_codec.id_tokens(r) for r in y.numpy().tolist()]
    out["label"] += labels
    out["valid_len"] += x["source_valid_len"].numpy().tolist()
    for row, wrow in zip(labels, w.numpy().tolist()):
      if [float(t != PAD) for t in row] != wrow:
        out["weight_ok"] = False
  return out


def compare(expected, got):
  """Number of differing cells per array (row-count mismatch counts every row)."""
  diffs = {}
  for key in ("source", "decoder_input", "label", "valid_len"):
    e, g = expected[key], got[key]
    if len(e) != len(g):
      diffs[key] = f"{len(g)} rows, expected {len(e)}"
      continue
    if key == "valid_len":
      diffs[key] = sum(a != b for a, b in zip(e, g))
    else:
      diffs[key] = sum(a != b for re_, rg in zip(e, g) for a, b in zip(re_, rg)) + sum(
          len(re_) != len(rg) for re_, rg in zip(e, g))
  return diffs


def run_check(input_file, num_train, num_val, num_steps, min_freq, work_dir):
  """Writes the dataset with mt_data, compares both splits; returns the report."""
  from mt_data import config as mt_config  # pylint: disable=import-outside-toplevel
  from mt_data import generator as mt_generator  # pylint: disable=import-outside-toplevel
  with open(input_file, encoding="utf-8") as f:
    raw = f.read()
  t0 = time.monotonic()
  expected, info = d2l_expected(raw, num_train, num_val, num_steps, min_freq)
  t1 = time.monotonic()
  out_dir = os.path.join(work_dir, "mt")
  cfg = mt_config.MTConfig(input_file=input_file, output_dir=out_dir, num_train=num_train,
                           num_val=num_val, min_freq=min_freq, quiet=True)
  mt_generator.create(cfg, log=lambda m: None)
  t2 = time.monotonic()
  report = dict(info)
  ok = True
  for split in ("train", "valid"):
    got = mt_token_arrays(out_dir, split, num_steps)
    diffs = compare(expected[split], got)
    split_ok = got["weight_ok"] and all(v == 0 for v in diffs.values())
    ok = ok and split_ok
    report[split] = {"rows": len(got["source"]), "differing_cells": diffs,
                     "sample_weight_ok": got["weight_ok"], "equal": split_ok}
  report["equal"] = ok
  report["seconds"] = {"d2l_reimplementation": round(t1 - t0, 2),
                       "mt_data_create": round(t2 - t1, 2)}
  return report


def main():
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--input_file", required=True, help="d2l's fra.txt (2 columns)")
  positive = {"num_train": 512, "num_val": 128, "num_steps": 9, "min_freq": 2}  # d2l's
  for name, default in positive.items():
    p.add_argument(f"--{name}", type=int, default=default)
  a = p.parse_args()
  if any(getattr(a, name) < 1 for name in positive):
    print("error: need " + ", ".join(f"--{name} >= 1" for name in positive), file=sys.stderr)
    return 2
  if not os.path.isfile(a.input_file):
    print(f"error: --input_file={a.input_file}: no such file", file=sys.stderr)
    return 2
  with tempfile.TemporaryDirectory() as tmp:
    report = run_check(a.input_file, a.num_train, a.num_val, a.num_steps, a.min_freq, tmp)
  print(json.dumps(report, indent=1))
  return 0 if report["equal"] else 1


if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.exit(main())
