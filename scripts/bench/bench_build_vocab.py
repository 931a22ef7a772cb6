"""Benchmarks `bert_data.build_vocab`: time, peak memory, and the [UNK] rate it buys.

    python scripts/bench/bench_build_vocab.py --data_dir=../shared/data

1. Speed and memory on a 26 MB corpus (PTB's training text 5 times, written
   to a temp folder, never kept): our WordPiece build (1 and 2 workers) and
   SentencePiece build, against the baseline measured in the same run:
   Hugging Face's ready-made `BertWordPieceTokenizer.train` (its own BERT
   normalizer and pre-tokenizer, all in Rust, not deterministic run to run).
   Peak RSS is summed over the process tree (psutil, every 50 ms).
2. [UNK] rate on PTB's test text of a vocab built from PTB's training text,
   against the bundled uncased BERT vocab, both through our WordPiece
   tokenizer (lowercased): [UNK] pieces / all pieces, and words with [UNK].
   PTB's text is lowercase ASCII with rare words already replaced, so both
   rates are about zero there; the same two vocabs are also measured on
   text from elsewhere, the English side of fra.txt (first 20,000 lines).
"""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench_bert import run_measured  # pylint: disable=wrong-import-position
from textrecords.runs import script_args  # pylint: disable=wrong-import-position

_HF_BASELINE = """
import sys
from tokenizers import BertWordPieceTokenizer
tok = BertWordPieceTokenizer(lowercase=True)
tok.train(files=[sys.argv[1]], vocab_size=int(sys.argv[2]), min_frequency=2,
          show_progress=False, limit_alphabet=1000)
tok.save_model(sys.argv[3])
"""


def make_corpus(src: str, path: str, copies: int) -> int:
  with open(src, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    for _ in range(copies):
      f.write(data)
  return len(data) * copies


def unk_rate(vocab: str, text_file: str, max_lines: int = 0, column: int = -1) -> dict:
  from bert_data.tokenizer import WordPieceTokenizer  # pylint: disable=import-outside-toplevel
  tok = WordPieceTokenizer(vocab)
  basic = tok._python_basic  # pylint: disable=protected-access
  unk = tok.token_to_id("[UNK]")
  pieces = unk_pieces = words = unk_words = 0
  with open(text_file, encoding="utf-8") as f:
    for i, line in enumerate(f):
      if max_lines and i >= max_lines:
        break
      if column >= 0:
        line = line.split("\t")[column]
      for word in basic.tokenize(line):
        ids = tok.encode(word)
        words += 1
        pieces += len(ids)
        n = ids.count(unk)
        unk_pieces += n
        unk_words += n > 0
  return {"vocab_lines": tok.vocab_size, "pieces": pieces,
          "unk_piece_share": unk_pieces / pieces, "unk_word_share": unk_words / words,
          "pieces_per_word": pieces / words}


def main():
  ap = script_args.ScriptParser()
  ap.add_argument("--data_dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                                     "shared", "data"))
  ap.add_argument("--vocab_size", type=int, default=30522)
  ap.add_argument("--copies", type=int, default=5)
  args = ap.parse_args()
  train = os.path.join(args.data_dir, "ptb.train.txt")
  test = os.path.join(args.data_dir, "ptb.test.txt")
  py = sys.executable
  with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    size = make_corpus(train, corpus, args.copies)
    print(f"corpus: {size / 1e6:.1f} MB (ptb.train.txt x{args.copies})")
    print("| run | wall s | MB/s | peak RSS MB | vs baseline (time) |")
    print("|---|---|---|---|---|")
    rows = []
    os.makedirs(os.path.join(tmp, "hf"))
    base = run_measured([py, "-c", _HF_BASELINE, corpus, str(args.vocab_size),
                         os.path.join(tmp, "hf")])
    rows.append(("baseline: HF BertWordPieceTokenizer.train", base))
    for workers in (2, 1):
      r = run_measured([py, "-m", "bert_data.build_vocab", f"--input_file={corpus}",
                        f"--output_file={tmp}/wp{workers}.txt",
                        f"--vocab_size={args.vocab_size}", f"--num_workers={workers}", "--quiet"])
      rows.append((f"build_vocab wordpiece, {workers} worker(s)", r))
    r = run_measured([py, "-m", "bert_data.build_vocab", f"--input_file={corpus}",
                      f"--output_file={tmp}/sp.model", "--kind=sentencepiece",
                      "--vocab_size=8000", "--quiet"])
    rows.append(("build_vocab sentencepiece (8000 pieces)", r))
    for name, r in rows:
      print(f"| {name} | {r['wall_s']:.1f} | {size / 1e6 / r['wall_s']:.1f} | "
            f"{r['peak_rss_mb']:,.0f} | {base['wall_s'] / r['wall_s']:.2f}x |")
    same = open(f"{tmp}/wp1.txt", "rb").read() == open(f"{tmp}/wp2.txt", "rb").read()
    print(f"1 vs 2 workers byte-identical: {same}")

    ptb_vocab = os.path.join(tmp, "ptb_vocab.txt")
    t = time.perf_counter()
    run_measured([py, "-m", "bert_data.build_vocab", f"--input_file={train}",
                  f"--output_file={ptb_vocab}", f"--vocab_size={args.vocab_size}", "--quiet"])
    print(f"\nvocab from ptb.train.txt built in {time.perf_counter() - t:.1f} s")
    print("| vocab | text | lines | [UNK] pieces | words with [UNK] | pieces per word |")
    print("|---|---|---|---|---|---|")
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bert_data",
                           "sample", "vocab.txt")
    fra = os.path.join(args.data_dir, "fra.txt")
    for text, kwargs in (("ptb.test.txt", {}), ("fra.txt English", {"max_lines": 20000,
                                                                    "column": 0})):
      path = test if text == "ptb.test.txt" else fra
      for name, vocab in (("built from ptb.train.txt", ptb_vocab),
                          ("bundled uncased BERT vocab", bundled)):
        u = unk_rate(vocab, path, **kwargs)
        print(f"| {name} | {text} | {u['vocab_lines']:,} | {u['unk_piece_share']:.4%} | "
              f"{u['unk_word_share']:.4%} | {u['pieces_per_word']:.3f} |")


if __name__ == "__main__":
  main()
