#!/usr/bin/env python3
"""Our word2vec trainer (w2v_data.sgd) against gensim on the same data and settings.

For each model (skip-gram, CBOW): records of every token are made from
--text (`w2v_data.create --subsample_t=1`), then, in the same run, each
side trains in its own child process, timed by the CPU seconds of its
training (tf.data's and gensim's threads included; process start and
imports are reported apart):
  ours: `w2v_data.sgd.train` with --threads=1 and --threads=2 (the two
      vectors must be byte-identical);
  gensim (when --gensim_python names an interpreter with gensim; skipped
      with a note otherwise): Word2Vec with workers=1 (twice: rerun
      identical?) and workers=2, on the same sentences restricted to our
      vocabulary (min_count=1 then gives the same vocabulary), the same
      window, noise words, dimension, subsampling threshold (gensim's
      formula is word2vec's: ours is given --subsample_formula=word2vec) and
      epochs.
Each vector set is scored on WordSim353 (Spearman) and the analogy file
(3CosAdd accuracy) with `w2v_data.vector_eval`; by default the copies that
ship with gensim (gensim/test/test_data), any path can be given.

The machine is shared: CPU seconds vary less than wall time; compare ratios
within one run. Results go to stdout as a table and to --json_out.

Example:
  python scripts/bench_w2v_train.py --text=/work/shared/data/ptb.train.txt \\
      --gensim_python=/work/venv-gensim/bin/python --epochs=50
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ours(args) -> dict:
  """Child: trains with w2v_data.sgd, saves the vectors; returns timings."""
  start = time.process_time()
  sys.path.insert(0, ROOT)
  from w2v_data import epochs, sgd, training, vectors  # pylint: disable=import-outside-toplevel
  training.set_threads(args.threads)
  import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  imported = time.process_time()
  settings = epochs.DrawSettings(subsample_t=args.subsample_t,
                                 subsample_formula=args.subsample_formula,
                                 max_window_size=args.window, num_noise_words=args.negative)
  _, names, matrix, tokens = sgd.train(args.data_dir, seed=args.seed, settings=settings,
                                       dim=args.dim, batch_size=args.batch_size,
                                       epochs=args.epochs, learning_rate=args.alpha,
                                       verbose=0)
  cpu = time.process_time() - imported
  vectors.save(args.vectors_out, names, matrix)
  return {"train_cpu_s": cpu, "startup_cpu_s": imported - start, "tokens": tokens}


def _gensim(args) -> dict:
  """Child (gensim's interpreter; no textrecords import): trains gensim Word2Vec."""
  start = time.process_time()
  from gensim.models import Word2Vec  # pylint: disable=import-outside-toplevel,import-error
  imported = time.process_time()
  with open(os.path.join(args.data_dir, "vocab.txt"), encoding="utf-8") as f:
    vocab = set(f.read().split("\n")[1:]) - {""}
  with open(args.text, encoding="utf-8") as f:
    sentences = [[w for w in line.split() if w in vocab] for line in f]
  sentences = [s for s in sentences if s]
  t0 = time.process_time()
  alpha = args.gensim_alpha or (0.025 if args.sg else 0.05)  # gensim's defaults
  model = Word2Vec(sentences, vector_size=args.dim, window=args.window, min_count=1,
                   sample=args.subsample_t, negative=args.negative, sg=int(args.sg),
                   epochs=args.epochs, workers=args.workers, seed=args.seed, alpha=alpha)
  cpu = time.process_time() - t0
  model.wv.save_word2vec_format(args.vectors_out)
  return {"train_cpu_s": cpu, "startup_cpu_s": imported - start,
          "tokens": sum(len(s) for s in sentences) * args.epochs}


def _child(python: str, role: str, common: list, extra: list) -> dict:
  out = tempfile.mktemp(suffix=".json")
  cmd = [python, os.path.abspath(__file__), f"--_child={role}", f"--_json={out}", *common,
         *extra]
  wall = time.time()
  r = subprocess.run(cmd, capture_output=True, text=True,
                     env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONHASHSEED="0"))
  if r.returncode != 0:
    raise RuntimeError(f"{role} failed: {r.stderr.strip().splitlines()[-1:]}")
  with open(out, encoding="utf-8") as f:
    res = json.load(f)
  os.unlink(out)
  res["wall_s"] = time.time() - wall
  return res


def _sha(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _score(path: str, pairs: str, analogies: str) -> dict:
  sys.path.insert(0, ROOT)
  from w2v_data import vector_eval, vectors  # pylint: disable=import-outside-toplevel
  names, m = vectors.load(path)
  keep = [i for i, n in enumerate(names) if n != "<unk>"]
  names, m = [names[i] for i in keep], m[keep]
  p = vector_eval.pair_score(names, m, vector_eval.read_pairs(pairs))
  a = vector_eval.analogy_accuracy(names, m, vector_eval.read_analogies(analogies))
  return {"wordsim_spearman": p.spearman, "pairs_covered": p.covered,
          "analogy_accuracy": a["accuracy"], "questions_covered": a["covered"]}


def _gensim_test_data(python: str):
  r = subprocess.run([python, "-c", "import gensim, os; print(os.path.join(os.path.dirname("
                      "gensim.__file__), 'test', 'test_data'))"], capture_output=True, text=True)
  return r.stdout.strip() if r.returncode == 0 else None


def _make_records(text: str, out_dir: str, model: str, a) -> str:
  d = os.path.join(out_dir, f"records_{model}")
  if not os.path.exists(os.path.join(d, "meta.json")):
    subprocess.run([sys.executable, "-m", "w2v_data.create", f"--input_file={text}",
                    f"--output_dir={d}", f"--model={model}", "--subsample_t=1",
                    f"--max_window_size={a.window}", f"--num_noise_words={a.negative}",
                    f"--min_freq={a.min_freq}", "--quiet"], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=ROOT))
  return d


def _runs(a, model: str, out_dir: str, gensim_ok: bool):
  """[(label, result)] of one model: ours (threads 1, 2), gensim (workers 1, 1, 2)."""
  d = _make_records(a.text, out_dir, model, a)
  common = [f"--data_dir={d}", f"--text={a.text}", f"--dim={a.dim}", f"--window={a.window}",
            f"--negative={a.negative}", f"--subsample_t={a.subsample_t}",
            f"--epochs={a.epochs}", f"--seed={a.seed}"]
  runs = []
  for threads in (1, 2):
    vec = os.path.join(out_dir, f"ours_{model}_t{threads}.vec")
    res = _child(sys.executable, "ours", common,
                 [f"--threads={threads}", f"--vectors_out={vec}",
                  f"--subsample_formula={a.subsample_formula}",
                  f"--batch_size={a.batch_size}",
                  f"--alpha={a.alpha or (0.025 if model == 'skipgram' else 0.05)}"])
    runs.append((f"ours threads={threads}", res, vec))
  if gensim_ok:
    for i, workers in enumerate((1, 1, 2)):
      vec = os.path.join(out_dir, f"gensim_{model}_w{workers}_{i}.vec")
      res = _child(a.gensim_python, "gensim", common,
                   [f"--workers={workers}", f"--vectors_out={vec}",
                    f"--sg={int(model == 'skipgram')}",
                    f"--gensim_alpha={a.gensim_alpha or 0}"])
      runs.append((f"gensim workers={workers}" + (" (rerun)" if i == 1 else ""), res, vec))
  return runs


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--text", default="", help="training text, one sentence a line (PTB train)")
  p.add_argument("--out_dir", default="", help="records and vectors (default: a temp dir)")
  p.add_argument("--models", default="skipgram,cbow")
  p.add_argument("--gensim_python", default="", help="an interpreter with gensim installed")
  p.add_argument("--pairs", default="", help="WordSim353-style file (default: gensim's)")
  p.add_argument("--analogies", default="", help="analogy file (default: gensim's)")
  p.add_argument("--epochs", type=int, default=50)
  p.add_argument("--dim", type=int, default=100)
  p.add_argument("--window", type=int, default=5)
  p.add_argument("--negative", type=int, default=5)
  p.add_argument("--min_freq", type=int, default=10)
  p.add_argument("--subsample_t", type=float, default=1e-4)
  p.add_argument("--subsample_formula", default="word2vec")
  p.add_argument("--batch_size", type=int, default=4096)
  p.add_argument("--alpha", type=float, default=0.0,
                 help="ours: starting rate (default: word2vec's, 0.025 skip-gram, 0.05 CBOW)")
  p.add_argument("--gensim_alpha", type=float, default=0.0,
                 help="default: gensim's (0.025 skip-gram, 0.05 CBOW)")
  p.add_argument("--seed", type=int, default=1)
  p.add_argument("--json_out", default="")
  for flag in ("_child", "_json", "data_dir", "vectors_out"):
    p.add_argument(f"--{flag}", default="", help=argparse.SUPPRESS)
  for flag in ("threads", "workers", "sg"):
    p.add_argument(f"--{flag}", type=int, default=0, help=argparse.SUPPRESS)
  a = p.parse_args(argv)
  if a._child:  # pylint: disable=protected-access
    res = (_ours if a._child == "ours" else _gensim)(a)  # pylint: disable=protected-access
    with open(a._json, "w", encoding="utf-8") as f:  # pylint: disable=protected-access
      json.dump(res, f)
    return 0
  if not a.text:
    print("error: --text is required", file=sys.stderr)
    return 2
  out_dir = a.out_dir or tempfile.mkdtemp(prefix="bench_w2v_train_")
  data = _gensim_test_data(a.gensim_python) if a.gensim_python else None
  if not data:
    print("note: gensim is not installed (--gensim_python); its side is skipped")
  pairs = a.pairs or (data and os.path.join(data, "wordsim353.tsv"))
  analogies = a.analogies or (data and os.path.join(data, "questions-words.txt"))
  if not pairs or not analogies:
    print("error: give --pairs and --analogies (or --gensim_python)", file=sys.stderr)
    return 2
  table = []
  for model in a.models.split(","):
    runs = _runs(a, model, out_dir, bool(data))
    for label, res, vec in runs:
      row = {"model": model, "run": label, **res, **_score(vec, pairs, analogies),
             "words_per_s": res["tokens"] / max(res["train_cpu_s"], 1e-9), "sha256": _sha(vec)}
      table.append(row)
      print(f"{model:8s} {label:26s} train {row['train_cpu_s']:7.1f} CPU s "
            f"(startup {row['startup_cpu_s']:.1f}, wall {row['wall_s']:.1f}) "
            f"{row['words_per_s']:9.0f} words/CPU s  WS353 {row['wordsim_spearman']:.3f} "
            f"({row['pairs_covered']} pairs)  analogy {row['analogy_accuracy']:.4f} "
            f"({row['questions_covered']} q)  sha {row['sha256'][:12]}", flush=True)
    shas = {label: _sha(vec) for label, _, vec in runs}
    print(f"{model}: ours threads 1 == 2: "
          f"{shas['ours threads=1'] == shas['ours threads=2']}" + (
              f"; gensim rerun identical: "
              f"{shas['gensim workers=1'] == shas['gensim workers=1 (rerun)']}; "
              f"gensim workers 1 == 2: {shas['gensim workers=1'] == shas['gensim workers=2']}"
              if data else ""))
  if a.json_out:
    with open(a.json_out, "w", encoding="utf-8") as f:
      json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "args": vars(a),
                 "rows": table}, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
