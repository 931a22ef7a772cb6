#!/usr/bin/env python3
"""Our word2vec trainer (w2v_data.train.sgd) at its defaults against gensim, same data, same run.

For each model (skip-gram, CBOW, PV-DBOW) the documented commands run:
`w2v_data.create` at its default flags (records of every token; word models
from --text, PV-DBOW from the halves of --pv_text's blocks of 20 lines,
`evaluation.split_documents`, with --doc_id_column --min_freq=2 as
docs/w2v_data.md shows), once with --num_workers=1 and once with 4; then, in
the same run, each side trains in its own child process, timed by the CPU
seconds of its training (tf.data's, numba's and gensim's threads included;
process start and imports are reported apart):
  ours, scripts/train_skipgram.py, train_cbow.py or train_pv.py given only
      --data_dir, --seed, --threads and --save_vectors (--ours_epochs adds
      --epochs), so every training setting is the script's default
      (`w2v_data.train.cli`; the time includes saving the vectors): on
      the 1-worker records with --threads=1 and on the 4-worker records with
      --threads=2 (the two vectors must be byte-identical);
  gensim (when --gensim_python names an interpreter with gensim; skipped
      with a note otherwise): Word2Vec (sg=1, sg=0) for --epochs, or
      Doc2Vec(dm=0) for --pv_epochs, at --window, with each of
      --gensim_workers (and a rerun of workers=1 with --gensim_rerun), and
      (--gensim_like_ours) workers=1 at our epochs, window and noise
      words, on the same
      tokens restricted to our vocabulary (min_count=1 then gives the same
      vocabulary), the same noise words and dimension, subsampling at
      --subsample_t (gensim's formula is word2vec's, our default), each
      side's own default rate.
With --seeds, both sides run every seed (ours threads=2 / 4 workers, gensim's
other worker counts and rerun: the first seed only) and a summary gives each
run kind's mean, sample standard deviation and range over the seeds:
WordSim353 on PTB's 217 pairs moves by a few hundredths between seeds.
Word vectors are scored on WordSim353 (Spearman) and the analogy file
(3CosAdd accuracy) with `w2v_data.train.evaluation`, by default the copies that
ship with gensim (gensim/test/test_data); document vectors by how often a
half's nearest other half is its sibling (`evaluation.sibling_accuracy`).

The machine is shared: CPU seconds vary less than wall time; compare ratios
within one run. Results go to stdout as a table and to --json_out.

Example:
  python scripts/bench/bench_w2v_train.py --text=ptb.train.txt --pv_text=ptb.test.txt \\
      --gensim_python=/work/venv-gensim/bin/python --seeds=3
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:  # a checkout, also under gensim's interpreter (--gensim_python)
  sys.path.insert(0, ROOT)
from textrecords.runs import script_args  # pylint: disable=wrong-import-position
MODELS = ("skipgram", "cbow", "pv_dbow")


SCRIPTS = {"skipgram": "train_skipgram", "cbow": "train_cbow", "pv": "train_pv"}


def _script_main(script: str):
  """The main() of scripts/<SCRIPTS[script]>.py, loaded from its file."""
  import importlib.util  # pylint: disable=import-outside-toplevel
  name = SCRIPTS[script]
  spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", f"{name}.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod.main


def _ours(args) -> dict:
  """Child: the documented command, scripts/train_*.py at its defaults (the vectors saved).

  Only --data_dir, --seed, --threads, --save_vectors (and --epochs with
  --ours_epochs) are passed: every other setting is the script's default.
  """
  start = time.process_time()
  sys.path.insert(0, ROOT)
  from w2v_data.train import cli as train_cli, models  # pylint: disable=import-outside-toplevel
  train_cli.set_threads(args.threads)
  import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  script = "pv" if args.sg < 0 else ("skipgram" if args.sg else "cbow")
  main = _script_main(script)
  imported = time.process_time()
  argv = [f"--data_dir={args.data_dir}", f"--seed={args.seed}", f"--threads={args.threads}",
          f"--save_vectors={args.vectors_out}"]
  if args.ours_epochs:
    argv.append(f"--epochs={args.ours_epochs}")
  if main(argv) != 0:
    raise RuntimeError(f"scripts/{SCRIPTS[script]}.py {' '.join(argv)} failed")
  cpu = time.process_time() - imported
  settings = _ours_settings(args, "pv_dbow" if script == "pv" else script)
  kept = models.read_meta(args.data_dir)["counts"]["subsampled_tokens"]
  return {"train_cpu_s": cpu, "startup_cpu_s": imported - start,
          "tokens": kept * settings["epochs"], **settings}


def _gensim(args) -> dict:
  """Child (gensim's interpreter, with absl-py for the flags): trains gensim Word2Vec/Doc2Vec."""
  start = time.process_time()
  from gensim.models import Doc2Vec, Word2Vec  # pylint: disable=import-outside-toplevel,import-error
  from gensim.models.doc2vec import TaggedDocument  # pylint: disable=import-outside-toplevel,import-error
  imported = time.process_time()
  with open(os.path.join(args.data_dir, "vocab.txt"), encoding="utf-8") as f:
    vocab = set(f.read().split("\n")[1:]) - {""}
  with open(args.text, encoding="utf-8") as f:
    lines = [line.rstrip("\n").split("\t") if args.sg < 0 else ["", line] for line in f]
  docs = [(tag, [w for w in text.split() if w in vocab]) for tag, text in lines]
  docs = [(tag, words) for tag, words in docs if words]
  common = dict(vector_size=args.dim, window=args.window, min_count=1,
                sample=args.subsample_t, negative=args.negative, workers=args.workers,
                seed=args.seed, epochs=args.epochs)
  t0 = time.process_time()
  if args.sg < 0:
    model = Doc2Vec([TaggedDocument(w, [t]) for t, w in docs], dm=0, **common)
    keys, vecs = list(model.dv.index_to_key), model.dv
  else:
    model = Word2Vec([w for _, w in docs], sg=int(args.sg), **common)
    keys, vecs = list(model.wv.index_to_key), model.wv
  cpu = time.process_time() - t0
  with open(args.vectors_out, "w", encoding="utf-8") as f:
    f.write(f"{len(keys)} {args.dim}\n")
    for k in keys:
      f.write(k + " " + " ".join(repr(float(x)) for x in vecs[k]) + "\n")
  return {"train_cpu_s": cpu, "startup_cpu_s": imported - start, "epochs": args.epochs,
          "window": args.window, "noise_words": args.negative,
          "tokens": sum(len(w) for _, w in docs) * args.epochs}


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


def _score(path: str, pairs: str, analogies: str, docs: bool) -> dict:
  sys.path.insert(0, ROOT)
  from w2v_data.train import evaluation, vectors  # pylint: disable=import-outside-toplevel
  names, m = vectors.load(path)
  if docs:
    return {"retrieval": evaluation.sibling_accuracy(names, m), "docs": len(names)}
  keep = [i for i, n in enumerate(names) if n != "<unk>"]
  names, m = [names[i] for i in keep], m[keep]
  p = evaluation.pair_score(names, m, evaluation.read_pairs(pairs))
  a = evaluation.analogy_accuracy(names, m, evaluation.read_analogies(analogies))
  return {"wordsim_spearman": p.spearman, "pairs_covered": p.covered,
          "analogy_accuracy": a["accuracy"], "questions_covered": a["covered"]}


def _gensim_test_data(python: str):
  r = subprocess.run([python, "-c", "import gensim, os; print(os.path.join(os.path.dirname("
                      "gensim.__file__), 'test', 'test_data'))"], capture_output=True, text=True)
  return r.stdout.strip() if r.returncode == 0 else None


def _pv_text(pv_text: str, out_dir: str) -> str:
  """The halves of pv_text's blocks of 20 lines, "id<TAB>text" a line; returns the path."""
  sys.path.insert(0, ROOT)
  from w2v_data.train import evaluation  # pylint: disable=import-outside-toplevel
  with open(pv_text, encoding="utf-8") as f:
    docs = evaluation.split_documents(f.read().split("\n"))
  path = os.path.join(out_dir, "pv_docs.tsv")
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(f"{tag}\t{text}\n" for tag, text in docs))
  return path


def create_flags(model: str, a) -> list:
  """w2v_data.create's flags for `model`'s records: the documented command's.

  Skip-gram and CBOW: none beyond --model (every default, so the records keep
  every token); PV-DBOW: --doc_id_column --min_freq=--pv_min_freq, as
  docs/w2v_data.md's example. --window, --negative and --min_freq are passed
  only where they differ from create's defaults.
  """
  sys.path.insert(0, ROOT)
  from w2v_data.config import W2vConfig  # pylint: disable=import-outside-toplevel
  default = W2vConfig(input_file="-", output_dir="-")
  flags = [f"--model={model}"]
  if model == "pv_dbow":
    flags += ["--doc_id_column", f"--min_freq={a.pv_min_freq}"]
  elif a.min_freq != default.min_freq:
    flags.append(f"--min_freq={a.min_freq}")
  for name, value in (("max_window_size", a.window), ("num_noise_words", a.negative)):
    if value != getattr(default, name):
      flags.append(f"--{name}={value}")
  return flags


def _make_records(text: str, out_dir: str, model: str, a, workers: int) -> str:
  d = os.path.join(out_dir, f"records_{model}_w{workers}")
  if not os.path.exists(os.path.join(d, "meta.json")):
    subprocess.run([sys.executable, "-m", "w2v_data.create", f"--input_file={text}",
                    f"--output_dir={d}", *create_flags(model, a), f"--num_workers={workers}",
                    "--quiet"], check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
  return d


def seed_list(seeds: str, seed: int):
  """The seeds of a run: "" -> [seed]; "N" -> N seeds from `seed` on; "3,7,9" -> those.

  Raises:
    ValueError: a count below 1, a repeated seed or a non-integer.
  """
  if not seeds.strip():
    return [seed]
  if "," not in seeds:
    count = int(seeds)
    if count < 1:
      raise ValueError(f"--seeds={seeds}: a count must be >= 1")
    return list(range(seed, seed + count))
  out = [int(s) for s in seeds.split(",") if s.strip()]
  if len(set(out)) != len(out):
    raise ValueError(f"--seeds={seeds}: a seed is repeated")
  return out


def _ours_specs(a, model: str, text: str, out_dir: str, seed: int, first: bool,
                common: list):
  """Ours for one seed: threads=1 on 1-worker records; the first seed also threads=2, 4."""
  specs = []
  for threads, workers in ((1, 1), (2, 4))[:2 if first else 1]:
    d = _make_records(text, out_dir, model, a, workers)
    vec = os.path.join(out_dir, f"ours_{model}_t{threads}_w{workers}_s{seed}.vec")
    specs.append((f"ours threads={threads} records of {workers} workers", sys.executable,
                  "ours", common, [f"--data_dir={d}", f"--threads={threads}",
                                   f"--vectors_out={vec}", f"--ours_epochs={a.ours_epochs}"],
                  vec))
  return specs


def _ours_settings(a, model: str) -> dict:
  """Our epochs, window and noise words for `model` (the training scripts' defaults,
  --ours_epochs)."""
  sys.path.insert(0, ROOT)
  from w2v_data.train import cli as train_cli  # pylint: disable=import-outside-toplevel
  script = "pv" if model == "pv_dbow" else model
  epochs, _, window = train_cli.SGD_MODEL_DEFAULTS[script]
  return {"epochs": a.ours_epochs or epochs, "window": window or a.window,
          "noise_words": train_cli.default_noise_words(script) or a.negative}


def _gensim_configs(a, model: str, first: bool, ours: dict):
  """[(label, workers, epochs, window, noise words)] of gensim's runs for one seed.

  Every seed: workers=1 at --epochs (--pv_epochs) and --window, and (with
  --gensim_like_ours) workers=1 at our epochs, window and noise words; the first seed
  also the other --gensim_workers and the --gensim_rerun.
  """
  epochs = a.pv_epochs if model == "pv_dbow" else a.epochs
  workers = [int(w) for w in a.gensim_workers.split(",") if w]
  if not first:
    workers = workers[:1]
  elif a.gensim_rerun:
    workers.insert(1, workers[0])
  configs = [(f"gensim workers={w}" + (" (rerun)" if i and w == workers[i - 1] else ""),
              w, epochs, a.window, a.negative) for i, w in enumerate(workers)]
  mine = (ours["epochs"], ours["window"], ours["noise_words"])
  if a.gensim_like_ours and mine != (epochs, a.window, a.negative):
    configs.append(("gensim workers=1 like ours", 1, *mine))
  return configs


def _specs(a, model: str, out_dir: str, gensim_ok: bool, seed: int, first: bool):
  """[(label, python, role, common, extra, vectors path)]: one model and seed's children."""
  text = _pv_text(a.pv_text, out_dir) if model == "pv_dbow" else a.text
  sg = {"skipgram": 1, "cbow": 0, "pv_dbow": -1}[model]
  common = [f"--text={text}", f"--dim={a.dim}", f"--negative={a.negative}",
            f"--subsample_t={a.subsample_t}", f"--seed={seed}", f"--sg={sg}"]
  specs = _ours_specs(a, model, text, out_dir, seed, first, [*common, f"--window={a.window}"])
  if not gensim_ok:
    return specs
  configs = _gensim_configs(a, model, first, _ours_settings(a, model))
  for i, (label, w, epochs, window, k) in enumerate(configs):
    vec = os.path.join(out_dir, f"gensim_{model}_w{w}_s{seed}_{i}.vec")
    specs.append((label, a.gensim_python, "gensim",
                  [*(c for c in common if not c.startswith("--negative=")),
                   f"--window={window}", f"--negative={k}"],
                  [f"--data_dir={_make_records(text, out_dir, model, a, 1)}",
                   f"--workers={w}", f"--vectors_out={vec}", f"--epochs={epochs}"], vec))
  return specs


def _run_specs(specs: list, jobs: int) -> list:
  """Runs the children of `specs`, `jobs` at a time; [(label, result, vectors path)]."""
  from concurrent import futures  # pylint: disable=import-outside-toplevel
  with futures.ThreadPoolExecutor(max(1, jobs)) as pool:
    results = list(pool.map(lambda s: _child(s[1], s[2], s[3], s[4]), specs))
  return [(s[0], res, s[5]) for s, res in zip(specs, results)]


def _row(model: str, seed: int, label: str, res: dict, vec: str, pairs: str,
         analogies: str) -> dict:
  """One run's table row: its result, scores, words/s and vectors' sha256."""
  return {"model": model, "seed": seed, "run": label, **res,
          **_score(vec, pairs, analogies, model == "pv_dbow"),
          "words_per_s": res["tokens"] / max(res["train_cpu_s"], 1e-9), "sha256": _sha(vec)}


def _print_model(model: str, seed: int, runs, pairs: str, analogies: str, table: list):
  """Scores and prints each run of one model and seed, and whether the vectors agree."""
  rows = [_row(model, seed, label, res, vec, pairs, analogies) for label, res, vec in runs]
  for row in rows:
    table.append(row)
    quality = (f"retrieval {row['retrieval']:.3f} ({row['docs']} docs)" if "retrieval" in row
               else f"WS353 {row['wordsim_spearman']:.3f} ({row['pairs_covered']} pairs)  "
               f"analogy {row['analogy_accuracy']:.4f} ({row['questions_covered']} q)")
    print(f"{model:8s} seed {seed:<3d} {row['run']:38s} {row['epochs']:3d} ep, window "
          f"{row['window']:2d}, K {row['noise_words']:2d}  train {row['train_cpu_s']:7.1f} CPU s "
          f"(startup {row['startup_cpu_s']:.1f}, wall {row['wall_s']:.1f}) "
          f"{row['words_per_s']:9.0f} words/CPU s  {quality}  sha {row['sha256'][:12]}",
          flush=True)
  ours = [r["sha256"] for r in rows if r["run"].startswith("ours")]
  gensim = [(r["run"], r["sha256"]) for r in rows
            if r["run"].startswith("gensim") and "like ours" not in r["run"]]
  said = []
  if len(ours) > 1:
    said.append(f"ours threads 1 / 1 worker == threads 2 / 4 workers: {ours[0] == ours[1]}")
  if len(gensim) > 1:
    said.append("gensim " + ", ".join(f"{label} == first: {sha == gensim[0][1]}"
                                      for label, sha in gensim[1:]))
  if said:
    print(f"{model} seed {seed}: " + "; ".join(said), flush=True)


SUMMED = ("train_cpu_s", "wall_s", "wordsim_spearman", "analogy_accuracy", "retrieval")


def summarize(table: list) -> list:
  """Per (model, run, epochs, window) over its seeds: n, and mean, sd, min, max of SUMMED.

  sd is the sample standard deviation (0 for one seed).
  """
  groups = {}
  for row in table:
    groups.setdefault((row["model"], row["run"], row["epochs"], row["window"]), []).append(row)
  out = []
  for (model, run, epochs, window), rows in groups.items():
    item = {"model": model, "run": run, "epochs": epochs, "window": window,
            "seeds": [r["seed"] for r in rows]}
    for key in SUMMED:
      values = [float(r[key]) for r in rows if key in r]
      if values:
        mean = sum(values) / len(values)
        var = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)
               if len(values) > 1 else 0.0)
        item[key] = {"mean": mean, "sd": var ** 0.5, "min": min(values), "max": max(values)}
    out.append(item)
  return out


def _print_summary(summary: list):
  """The mean, sd and range over the seeds of each run kind."""
  print("\nover seeds: mean +- sd [min, max]")
  for item in summary:
    cells = [f"{item['model']:8s} {item['run']:38s} {item['epochs']:3d} ep, window "
             f"{item['window']:2d}, {len(item['seeds'])} seeds"]
    for key, name, fmt in (("train_cpu_s", "train CPU s", ".1f"),
                           ("wordsim_spearman", "WS353", ".3f"),
                           ("analogy_accuracy", "analogy", ".4f"),
                           ("retrieval", "retrieval", ".3f")):
      if key in item:
        v = item[key]
        cells.append(f"{name} {v['mean']:{fmt}} +- {v['sd']:{fmt}} "
                     f"[{v['min']:{fmt}}, {v['max']:{fmt}}]")
    print("  ".join(cells), flush=True)


def main(argv=None) -> int:
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--text", default="", help="training text, one sentence a line (PTB train)")
  p.add_argument("--pv_text", default="",
                 help="PV-DBOW: text whose blocks of 20 lines are halved into documents "
                 "(PTB test); required when --models has pv_dbow")
  p.add_argument("--out_dir", default="", help="records and vectors (default: a temp dir)")
  p.add_argument("--models", default=",".join(MODELS))
  p.add_argument("--gensim_python", default="", help="an interpreter with gensim "
                 "and absl-py installed")
  p.add_argument("--gensim_workers", default="1,2")
  p.add_argument("--gensim_rerun", action="store_true", help="rerun gensim workers=1")
  p.add_argument("--pairs", default="", help="WordSim353-style file (default: gensim's)")
  p.add_argument("--analogies", default="", help="analogy file (default: gensim's)")
  p.add_argument("--epochs", type=int, default=50, help="gensim's word models")
  p.add_argument("--pv_epochs", type=int, default=100, help="gensim's Doc2Vec")
  p.add_argument("--ours_epochs", type=int, default=0, help="default: the scripts' defaults")
  p.add_argument("--dim", type=int, default=100)
  p.add_argument("--window", type=int, default=5)
  p.add_argument("--negative", type=int, default=5)
  p.add_argument("--min_freq", type=int, default=10)
  p.add_argument("--pv_min_freq", type=int, default=2)
  p.add_argument("--subsample_t", type=float, default=1e-4)
  p.add_argument("--seed", type=int, default=1)
  p.add_argument("--seeds", default="",
                 help="N: N seeds from --seed on; or a list, e.g. 1,2,3; both sides run "
                 "each and the summary gives mean, sd and range per run kind (empty: --seed)")
  p.add_argument("--jobs", type=int, default=1,
                 help="children run at once (each times its own CPU seconds; more at once "
                 "share the cores)")
  p.add_argument("--gensim_like_ours", type=int, default=1,
                 help="1: also gensim workers=1 at our epochs and window, every seed")
  p.add_argument("--json_out", default="")
  for flag in ("_child", "_json", "data_dir", "vectors_out"):
    p.add_argument(f"--{flag}", default="", help=script_args.SUPPRESS)
  for flag in ("threads", "workers", "sg"):
    p.add_argument(f"--{flag}", type=int, default=0, help=script_args.SUPPRESS)
  a = p.parse_args(argv)
  if a._child:  # pylint: disable=protected-access
    res = (_ours if a._child == "ours" else _gensim)(a)  # pylint: disable=protected-access
    with open(a._json, "w", encoding="utf-8") as f:  # pylint: disable=protected-access
      json.dump(res, f)
    return 0
  return _bench(a)


def _bench(a) -> int:
  """The parent: every model's runs, the table, --json_out."""
  models = a.models.split(",")
  bad = [m for m in models if m not in MODELS]
  if bad or not a.text and set(models) - {"pv_dbow"} or "pv_dbow" in models and not a.pv_text:
    print(f"error: --models of {', '.join(MODELS)}; --text for word models, --pv_text for "
          "pv_dbow", file=sys.stderr)
    return 2
  try:
    seeds = seed_list(a.seeds, a.seed)
  except ValueError as e:
    print(f"error: {e}" if "--seeds" in str(e) else f"error: --seeds={a.seeds}: {e}",
          file=sys.stderr)
    return 2
  out_dir = a.out_dir or tempfile.mkdtemp(prefix="bench_w2v_train_")
  os.makedirs(out_dir, exist_ok=True)  # PV-DBOW's documents are written there first
  data = _gensim_test_data(a.gensim_python) if a.gensim_python else None
  if not data:
    print("note: gensim is not installed (--gensim_python); its side is skipped")
  pairs = a.pairs or (data and os.path.join(data, "wordsim353.tsv"))
  analogies = a.analogies or (data and os.path.join(data, "questions-words.txt"))
  if (not pairs or not analogies) and set(models) - {"pv_dbow"}:
    print("error: give --pairs and --analogies (or --gensim_python)", file=sys.stderr)
    return 2
  plan = [(model, seed, _specs(a, model, out_dir, bool(data), seed, i == 0))
          for model in models for i, seed in enumerate(seeds)]
  done = _run_specs([spec for _, _, specs in plan for spec in specs], a.jobs)
  table = []
  for model, seed, specs in plan:
    runs, done = done[:len(specs)], done[len(specs):]
    _print_model(model, seed, runs, pairs, analogies, table)
  summary = summarize(table)
  _print_summary(summary)
  if a.json_out:
    with open(a.json_out, "w", encoding="utf-8") as f:
      json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "args": vars(a),
                 "load": os.getloadavg(), "rows": table, "summary": summary}, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
