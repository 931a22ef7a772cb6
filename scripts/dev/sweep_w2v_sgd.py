#!/usr/bin/env python3
"""Our word2vec trainer (w2v_data.train.sgd, kernel engine) over settings and seeds, scored.

For choosing the trainer's defaults: trains every --configs entry with every
seed of --seeds on one w2v_data dataset (records of every token:
`w2v_data.create --subsample_t=1`), one after another in this process on
one thread, and prints a line a run: the settings, the seed, the training
CPU seconds and the quality (word models: the Spearman of each --pairs file,
e.g. WordSim353 and SimLex-999, and analogy accuracy on --analogies; PV:
sibling retrieval, `evaluation.sibling_accuracy`, for documents made by
`evaluation.split_documents` as bench_w2v_train.py makes them). Compare CPU
seconds only within one run on a shared machine; for gensim and the
defaults side by side use bench_w2v_train.py.

Example:
  python scripts/dev/sweep_w2v_sgd.py --data_dir=out/ptb_all --seeds=1,2 \\
      --pairs=wordsim353.tsv,simlex999.txt --analogies=questions-words.txt \\
      --configs='[{"epochs": 30, "rate": 0.05, "window": 8}]'
Config keys: epochs, rate (required); window, noise_words, subsample_t
(default 1e-4). --also_in_out: word models also score the input plus output
vectors (`--word_vectors=in+out`) of the same run.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from textrecords.runs import script_args  # pylint: disable=wrong-import-position


def _quality(names, m, model: str, pairs, analogies) -> str:
  from w2v_data.train import evaluation  # pylint: disable=import-outside-toplevel
  if model in ("pv_dbow", "pv_dm"):
    return f"retrieval {evaluation.sibling_accuracy(names, m):.3f}"
  scores = [f"{label} {evaluation.pair_score(names, m, rows).spearman:.3f}"
            for label, rows in pairs]
  a = evaluation.analogy_accuracy(names, m, analogies)["accuracy"]
  return f"{' '.join(scores)} analogy {a * 100:.2f}%"


def main(argv=None) -> int:
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--data_dir", required=True)
  p.add_argument("--configs", required=True, help="a JSON list of settings (see above)")
  p.add_argument("--seeds", default="1", help="comma-separated")
  p.add_argument("--pairs", default="",
                 help="word models: WordSim353-style files, comma-separated (each scored, "
                 "labelled with its file name)")
  p.add_argument("--analogies", default="", help="word models: analogy file")
  p.add_argument("--also_in_out", action="store_true",
                 help="word models: also score the in+out vectors of each run")
  a = p.parse_args(argv)
  from w2v_data.train import cli as train_cli, draws, evaluation, models, sgd, vectors as vectors_lib  # pylint: disable=import-outside-toplevel
  train_cli.set_threads(1)
  model = models.read_meta(a.data_dir).get("model", "skipgram")
  word = model in ("skipgram", "cbow")
  if word and not (a.pairs and a.analogies):
    print("error: --pairs and --analogies are needed for word models", file=sys.stderr)
    return 2
  pairs = [(os.path.splitext(os.path.basename(path))[0], evaluation.read_pairs(path))
           for path in a.pairs.split(",") if path] if word else None
  analogies = evaluation.read_analogies(a.analogies) if word else None
  for cfg in json.loads(a.configs):
    for seed in [int(s) for s in a.seeds.split(",")]:
      settings = draws.DrawSettings(
          subsample_t=cfg.get("subsample_t", 1e-4), subsample_formula="word2vec",
          max_window_size=cfg.get("window"), num_noise_words=cfg.get("noise_words"))
      start = time.process_time()
      trained, names, m, _ = sgd.train(a.data_dir, seed=seed, settings=settings, dim=100,
                                 epochs=cfg["epochs"], learning_rate=cfg["rate"], verbose=0,
                                 engine="kernel")
      cpu = time.process_time() - start
      print(f"{json.dumps(cfg)} seed {seed}: {cpu:.1f} CPU s, "
            f"{_quality(names, m, model, pairs, analogies)} (load {os.getloadavg()[0]:.1f})",
            flush=True)
      if word and a.also_in_out:
        names, m = vectors_lib.without_unk(models.read_tokens(a.data_dir),
                                           sgd.vectors(trained, "in+out")[1])
        print(f"  in+out: {_quality(names, m, model, pairs, analogies)}", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
