"""bert_data's readers refuse records whose vocab changed since create (issue 36 item 4).

The create-time vocab is listed in the metadata's `external_files` and
checked by `textrecords.datasets.metadata.verified_files`, the mechanism
that checks w2v_data's and mt_data's vocab.txt.
"""

import os
import shutil
import subprocess
import sys

import pytest

import bert_data
from textrecords.errors import UserError

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(HERE, "bert_data", "sample")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
  """(records path, vocab path) of a small dataset made with a private vocab copy."""
  d = tmp_path_factory.mktemp("bvocab")
  vocab = str(d / "vocab.txt")
  shutil.copy(os.path.join(SAMPLE, "vocab.txt"), vocab)
  out = str(d / "out" / "train.tfrecord")
  subprocess.run([sys.executable, "-m", "bert_data.create",
                  f"--input_file={os.path.join(SAMPLE, 'sample_corpus.txt')}",
                  f"--output_file={out}", f"--vocab_file={vocab}", "--dupe_factor=1",
                  "--num_workers=1"], check=True, capture_output=True, cwd=HERE)
  return out, vocab


READERS = {
    "make_dataset": lambda loc, **kw: bert_data.make_dataset(loc, 8, **kw),
    "numpy_batches": lambda loc, **kw: next(iter(bert_data.numpy_batches(loc, 8, **kw))),
}


@pytest.fixture
def restored(made):
  """The dataset, its vocab restored afterwards."""
  out, vocab = made
  saved = open(vocab, "rb").read()
  yield out, vocab
  with open(vocab, "wb") as f:
    f.write(saved)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_vocab_with_a_line_added_is_refused_naming_it(restored, reader):
  out, vocab = restored
  READERS[reader](out)  # unchanged: reads
  with open(vocab, "a", encoding="utf-8") as f:
    f.write("extra\n")
  for verify in ("checksum", "size"):
    with pytest.raises(UserError) as e:
      READERS[reader](out, verify=verify)
    msg = str(e.value)
    assert vocab in msg and "changed" in msg and "\n" not in msg


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_vocab_changed_in_place_is_refused_by_its_checksum(restored, reader):
  out, vocab = restored
  data = bytearray(open(vocab, "rb").read())
  data[0:1] = b"#" if data[0:1] != b"#" else b"$"  # same size, other bytes
  with open(vocab, "wb") as f:
    f.write(bytes(data))
  with pytest.raises(UserError, match="sha256 differs"):
    READERS[reader](out)
  READERS[reader](out, verify="size")  # size mode does not hash


def test_a_vocab_no_longer_where_create_read_it_is_not_checked(restored):
  out, vocab = restored
  os.rename(vocab, vocab + ".moved")
  try:
    for read in READERS.values():
      read(out)  # a dataset copied to another machine stays readable
  finally:
    os.rename(vocab + ".moved", vocab)


def test_train_bert_tiny_refuses_a_changed_vocab_in_one_line(restored):
  out, vocab = restored
  with open(vocab, "a", encoding="utf-8") as f:
    f.write("extra\n")
  p = subprocess.run([sys.executable, os.path.join(HERE, "scripts", "train_bert_tiny.py"),
                      "--input", out, "--steps", "1"], capture_output=True, text=True,
                     cwd=HERE, check=False)
  assert p.returncode != 0
  lines = [l for l in p.stderr.splitlines() if l.startswith("error:")]
  assert len(lines) == 1 and vocab in lines[0], p.stderr[-2000:]
  assert "Traceback" not in p.stderr
