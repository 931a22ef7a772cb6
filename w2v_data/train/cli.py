"""The command line shared by the training scripts (scripts/train_*.py).

Flags every script takes (`add_flags`), and one run (`run`): train, save
the vectors in word2vec text format, print a few nearest neighbours;
`vectors_main` is the whole main of a script training CBOW or paragraph
vectors. Two trainers (--trainer): "sgd" (default; `w2v_data.train.sgd`:
word2vec's SGD on fresh draws of every epoch, by default in the numba
kernel of `w2v_data.train.kernel_engine`; defaults in SGD_DEFAULTS and
SGD_MODEL_DEFAULTS) and "keras" (d2l's Keras models with Adam on the
records' one draw, `w2v_data.train.models`). Imports TensorFlow only when a
run starts.
"""

import sys
import time
from typing import Callable, Optional, Sequence

from textrecords.errors import UserError
from textrecords.runs import script_args
from w2v_data.train import draws as draws_lib
from w2v_data.train import models
from w2v_data.train import sgd
from w2v_data.train import vectors


TRAINERS = ("sgd", "keras")
SGD_DEFAULTS = {"batch_size": 4096, "learning_rate": 0.025, "subsample_t": 1e-4,
                "subsample_formula": "word2vec", "engine": "auto"}
# The sgd trainer's defaults per script: (epochs, starting learning rate, max window;
# None: the records').
SGD_MODEL_DEFAULTS = {"skipgram": (30, 0.025, 5), "cbow": (30, 0.05, 8),
                      "pv": (100, 0.025, None)}
# The sgd trainer's fresh subsampling threshold where a script's differs from
# SGD_DEFAULTS': PV-DBOW's short documents gain from keeping fewer frequent words,
# CBOW's analogies from keeping more.
SGD_MODEL_SUBSAMPLE_T = {"pv": 3e-5, "cbow": 5e-4}
# The sgd trainer's noise words per pair where a script's differ from the records':
# skip-gram with 10 at 30 epochs matches 5 at 50 epochs on WordSim353 at the same CPU
# and scores higher on SimLex-999 and analogies (BENCHMARKS.md).
SGD_MODEL_NOISE_WORDS = {"skipgram": 10}
# The saved word vectors (`w2v_data.train.sgd.vectors`) where a script's differ from "in":
# CBOW's input plus output vectors score higher on WordSim353 at the same analogies.
SGD_MODEL_WORD_VECTORS = {"cbow": "in+out"}


def default_subsample_t(sgd_model: str) -> float:
  """The sgd trainer's default subsampling threshold for a script's model."""
  return SGD_MODEL_SUBSAMPLE_T.get(sgd_model, SGD_DEFAULTS["subsample_t"])


def default_noise_words(sgd_model: str) -> Optional[int]:
  """The sgd trainer's default noise words per pair for a script (None: the records')."""
  return SGD_MODEL_NOISE_WORDS.get(sgd_model)


def default_word_vectors(sgd_model: str) -> str:
  """The sgd trainer's default saved word vectors ("in" or "in+out") for a word model."""
  return SGD_MODEL_WORD_VECTORS.get(sgd_model, "in")


def parser(doc: str) -> script_args.ScriptParser:
  """The parser of a training script: its description is `doc`'s first line.

  A bad flag value (e.g. --engine=bogus, --epochs=0) ends the run with one
  line naming the flag and exit status 2, before anything is read or trained
  (`textrecords.runs.script_args`).
  """
  return script_args.ScriptParser(description=doc.split("\n")[0])


def add_flags(p: script_args.ScriptParser, *, epochs: int = 5, learning_rate: float = 0.002,
              vectors_help: str = "the vectors", sgd_model: str = "skipgram"):
  """Adds --data_dir, --trainer, sizes, draws, --seed, --threads and --save_vectors to `p`.

  `sgd_model`: whose sgd defaults (SGD_MODEL_DEFAULTS) the flags get.
  """
  sgd_epochs, sgd_learning_rate, sgd_window = SGD_MODEL_DEFAULTS[sgd_model]
  p.add_argument("--data_dir", required=True, help="a w2v_data.create --output_dir")
  p.add_argument("--trainer", choices=TRAINERS, default="sgd",
                 help="sgd: word2vec's SGD on fresh draws every epoch; keras: d2l's Keras "
                 "model with Adam on the records' draw")
  p.add_argument("--embed_size", type=int, default=100, check=script_args.POSITIVE)
  p.add_argument("--batch_size", type=int, default=None, check=script_args.POSITIVE,
                 help=f"default: {SGD_DEFAULTS['batch_size']} pairs/centers (sgd), 512 (keras)")
  p.add_argument("--epochs", type=int, default=None, check=script_args.POSITIVE,
                 help=f"default: {sgd_epochs} (sgd), {epochs} (keras)")
  p.add_argument("--steps_per_epoch", type=int, default=None, check=script_args.POSITIVE,
                 help="keras trainer only")
  p.add_argument("--learning_rate", type=float, default=None, check=script_args.RATE,
                 help=f"default: {sgd_learning_rate} falling linearly to 1e-4 of it (sgd), "
                 f"{learning_rate} (keras, Adam)")
  p.add_argument("--subsample_t", type=float, default=None, check=script_args.FRACTION,
                 help="sgd: the subsampling threshold drawn afresh every epoch (records "
                 "of every token: w2v_data.create's default); default "
                 f"{default_subsample_t(sgd_model)}")
  p.add_argument("--subsample_formula", choices=("sqrt", "word2vec"),
                 default=SGD_DEFAULTS["subsample_formula"],
                 help="sgd: word2vec (word2vec.c's and gensim's keep probability) or sqrt "
                 "(d2l's)")
  p.add_argument("--engine", choices=("auto", "kernel", "xla"), default=SGD_DEFAULTS["engine"],
                 help="sgd: kernel (word2vec.c's per-example updates in a numba kernel, "
                 "--batch_size unused), xla (a batch's updates summed in an XLA step); auto: "
                 "kernel when numba is installed")
  p.add_argument("--window", type=int, default=None, check=script_args.POSITIVE,
                 help=f"sgd: max window (default: {sgd_window or 'the records'})")
  noise_words = default_noise_words(sgd_model)
  noise_default = noise_words or "the records'"
  p.add_argument("--noise_words", type=int, default=None, check=script_args.POSITIVE,
                 help=f"sgd: K, noise words per pair (default: {noise_default})")
  if sgd_model != "pv":
    p.add_argument("--word_vectors", choices=("in", "in+out"),
                   default=default_word_vectors(sgd_model),
                   help="sgd: the saved vectors: in (the input vectors, as word2vec.c and "
                   "gensim) or in+out (input plus output vectors); default "
                   f"{default_word_vectors(sgd_model)}")
  p.add_argument("--threads", type=int, default=0, check=script_args.NON_NEGATIVE,
                 help="TensorFlow intra- and inter-op threads (0: TF's default)")
  p.add_argument("--seed", type=int, default=None, check=script_args.SEED,
                 help="seed everything (deterministic on CPU); default: not seeded (sgd: 0)")
  p.add_argument("--save_vectors", default=None, check=script_args.writable_folder,
                 help=f"write {vectors_help} here (word2vec text format)")
  p.set_defaults(_keras_defaults=(epochs, learning_rate),
                 _sgd_defaults=(sgd_epochs, sgd_learning_rate), _sgd_window=sgd_window,
                 _sgd_subsample_t=default_subsample_t(sgd_model), _sgd_noise_words=noise_words)


def resolve(args):
  """Fills the trainer-dependent defaults of parsed `args` in place; returns args."""
  epochs, rate = args._sgd_defaults if args.trainer == "sgd" else args._keras_defaults  # pylint: disable=protected-access
  if args.epochs is None:
    args.epochs = epochs
  if args.learning_rate is None:
    args.learning_rate = rate
  if args.batch_size is None:
    args.batch_size = SGD_DEFAULTS["batch_size"] if args.trainer == "sgd" else 512
  return args


def set_threads(threads: int):
  """Sets TensorFlow's intra- and inter-op thread counts (0: leave TF's default).

  Raises:
    UserError: a negative count, or TensorFlow already running in this process.
  """
  if threads < 0:
    raise UserError(f"--threads={threads}: must be >= 0")
  if threads:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    try:
      tf.config.threading.set_intra_op_parallelism_threads(threads)
      tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError as e:
      raise UserError(f"--threads={threads}: TensorFlow is already running in this "
                      "process") from e


def check_keep_every_token(data_dir: str, meta: dict):
  """UserError (one line, the fix) unless the records at data_dir kept every token.

  The sgd trainer subsamples afresh every epoch; records written with a
  --subsample_t below 1 hold one draw (d2l's), which trains worse vectors.
  """
  if not draws_lib.records_keep_every_token(meta):
    raise UserError(
        f"--data_dir={data_dir}: the records hold one subsampled draw (--subsample_t="
        f"{meta['flags']['subsample_t']:g}); the sgd trainer subsamples afresh every epoch: "
        "rerun w2v_data.create without --subsample_t (default --subsample_t=1, every "
        "token), or train this draw with --trainer=keras")


def check_inputs(data_dir: str, check_dataset: Callable[[str], object]):
  """Before training: `check_dataset(data_dir)` (the calling script's check
  that the records are of a model it trains, else one line naming the script
  for them), then TensorFlow and Keras installed (else one line naming the
  extra)."""
  check_dataset(data_dir)
  script_args.require_tensorflow()


def sgd_train(args, expect):
  """Trains with `w2v_data.train.sgd` from parsed flags; returns (names, matrix)."""
  set_threads(args.threads)
  check_keep_every_token(args.data_dir, models.read_meta(args.data_dir))
  t = args._sgd_subsample_t if args.subsample_t is None else args.subsample_t  # pylint: disable=protected-access
  k = args._sgd_noise_words if args.noise_words is None else args.noise_words  # pylint: disable=protected-access
  settings = draws_lib.DrawSettings(subsample_t=t, subsample_formula=args.subsample_formula,
                                     max_window_size=args.window or args._sgd_window,  # pylint: disable=protected-access
                                     num_noise_words=k)
  _, names, matrix, _ = sgd.train(
      args.data_dir, seed=0 if args.seed is None else args.seed, settings=settings,
      dim=args.embed_size, batch_size=args.batch_size, epochs=args.epochs,
      learning_rate=args.learning_rate, expect=tuple(expect), verbose=2, engine=args.engine,
      word_vectors=getattr(args, "word_vectors", "in"))
  return names, matrix


def run(args, train: Callable, queries, what: str = "") -> int:
  """Trains with `train(args)` -> (names, matrix), saves and shows neighbours.

  `queries`: names to show neighbours of, or a callable giving them from the
  trained names.

  Returns the exit status: 0, or 2 after a one-line error.
  """
  try:
    start = time.time()
    names, matrix = train(args)
    if args.save_vectors:
      digest = vectors.save(args.save_vectors, names, matrix)
      print(f"saved {len(names)} {what}vectors to {args.save_vectors} (sha256 {digest})")
  except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"trained in {time.time() - start:.1f} s")
  if callable(queries):
    queries = queries(names)
  for q in filter(None, (w.strip() for w in queries)):
    near = models.nearest(matrix, names, q)
    shown = ", ".join(f"{t} ({c:.3f})" for t, c in near) if near else "(unknown)"
    print(f"nearest to {what}{q!r}: {shown}")
  return 0


def vectors_main(argv: Optional[Sequence[str]], doc: str, expect: Sequence[str], *,
                 check_dataset: Callable[[str], object], query_flag: str, query_help: str,
                 query_default: str = "", what: str = "", **flag_defaults) -> int:
  """The main of a script training `models.train` on records of the `expect`
  models (`check_dataset`: as `check_inputs`).

  Flags: `add_flags(**flag_defaults)` and --<query_flag> (comma-separated
  names to show neighbours of; empty: the first three names trained).
  """
  p = parser(doc)
  add_flags(p, **flag_defaults)
  p.add_argument(f"--{query_flag}", default=query_default, help=query_help)
  args = resolve(p.parse_args(argv))

  def train(a):
    check_inputs(a.data_dir, check_dataset)
    if a.trainer == "sgd":
      return sgd_train(a, expect)
    _, _, names, matrix = models.train(
        a.data_dir, embed_size=a.embed_size, batch_size=a.batch_size, epochs=a.epochs,
        learning_rate=a.learning_rate, seed=a.seed, steps_per_epoch=a.steps_per_epoch,
        expect=tuple(expect))
    return names, matrix

  asked = getattr(args, query_flag)
  return run(args, train, lambda names: (asked or ",".join(names[:3])).split(","), what=what)
