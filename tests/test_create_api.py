"""The Python creates (`<package>.create_dataset`): the command line's bytes,
errors and checks, as functions returning the `RunResult`."""

import hashlib
import json
import os

import pytest

import bert_data
import mt_data
import w2v_data
from conftest import SAMPLE_TEXT, TESTDATA, VOCAB, W2V_TINY, error_lines, run_cli
from textrecords.errors import UserError
from textrecords.runs.run import RunResult

MT_PAIRS = os.path.join(TESTDATA, "mt_pairs.txt")


def _digests(folder) -> dict:
  """{relative path: sha256} of every file under `folder`."""
  out = {}
  for root, _, files in os.walk(folder):
    for name in files:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
  return out


# (package, create_dataset's arguments, the same run's flags) per package; {out}: the output.
CASES = {
    "bert_data": (bert_data, lambda out: ([SAMPLE_TEXT], f"{out}/train.tfrecord"),
                  dict(vocab_file=VOCAB, max_seq_length=32, max_predictions_per_seq=5,
                       dupe_factor=2, num_shards=2),
                  lambda out: [f"--input_file={SAMPLE_TEXT}", f"--output_file={out}/train.tfrecord",
                               f"--vocab_file={VOCAB}", "--max_seq_length=32",
                               "--max_predictions_per_seq=5", "--dupe_factor=2",
                               "--num_shards=2"]),
    "w2v_data": (w2v_data, lambda out: (W2V_TINY, out),
                 dict(min_freq=2, num_shards=2, subsample_t=1e-4),
                 lambda out: [f"--input_file={W2V_TINY}", f"--output_dir={out}", "--min_freq=2",
                              "--num_shards=2", "--subsample_t=1e-4"]),
    "mt_data": (mt_data, lambda out: ([MT_PAIRS], out),
                dict(num_train=30, num_val=12, num_shards=2),
                lambda out: [f"--input_file={MT_PAIRS}", f"--output_dir={out}", "--num_train=30",
                             "--num_val=12", "--num_shards=2"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_create_dataset_writes_the_command_lines_bytes(tmp_path, name):
  package, args, options, argv = CASES[name]
  out = tmp_path / "out"  # the same path for both (bert's metadata names its outputs)
  result = package.create_dataset(*args(out), num_workers=2, **options)
  assert isinstance(result, RunResult) and not result.already_complete
  api = _digests(out)
  os.rename(out, tmp_path / "api")
  run_cli(f"{name}.create", *argv(out), "--num_workers=1", "--quiet")
  assert _digests(out) == api and len(api) >= 3
  assert sum(f.get("records", 0) for f in result.files) > 0
  # The same call again: the output exists, as on the command line.
  with pytest.raises(UserError, match="pass --overwrite"):
    package.create_dataset(*args(out), **options)
  again = package.create_dataset(*args(out), resume=True, **options)
  as_json = lambda metas: json.dumps(metas, sort_keys=True)  # noqa: E731
  assert again.already_complete and as_json(again.metas) == as_json(result.metas)
  assert _digests(out) == api


@pytest.mark.parametrize("name", sorted(CASES))
def test_create_dataset_refuses_as_the_command_line(tmp_path, name):
  package, args, options, argv = CASES[name]
  out = tmp_path / "out"
  with pytest.raises(UserError, match=r"create_dataset: unknown option 'max_sequence_length' "
                                      r"\(options: .*num_shards"):
    package.create_dataset(*args(out), max_sequence_length=5, **options)
  with pytest.raises(UserError) as e:
    package.create_dataset(*args(out), num_workers=0, **options)
  r = run_cli(f"{name}.create", *argv(out), "--num_workers=0")
  assert str(e.value).startswith("--num_workers=0: ")
  assert r.returncode == 2 and error_lines(r.stderr) == [f"error: {e.value}"]
  assert not out.exists()  # nothing written by either


def test_create_dataset_options_that_depend_on_others(tmp_path):
  # --dupe_factor left out is 1 with dynamic masking (as on the command line).
  r = bert_data.create_dataset(SAMPLE_TEXT, str(tmp_path / "d.tfrecord"), vocab_file=VOCAB,
                               max_seq_length=32, max_predictions_per_seq=5, masking="dynamic")
  assert r.meta["flags"]["dupe_factor"] == 1
  with pytest.raises(UserError, match=r"--vocab_size=500: has no effect with --tokenizer=word"):
    mt_data.create_dataset(MT_PAIRS, str(tmp_path / "mt"), vocab_size=500)
