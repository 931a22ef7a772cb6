"""The bundled mt sample: made by scripts/dev/make_mt_sample.py, and the README's mt commands fit it.

Issue 36 item 12: the README's `mt_data.create ... --num_train=512
--num_val=128` on the sample gave 50 train and 0 validation pairs, then
train_seq2seq.py ended in KeyError: 'loss' (batch 64 > 50 pairs).
"""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, error_lines, load_script

SAMPLE_DIR = os.path.join(REPO, "mt_data", "sample")
SAMPLE = os.path.join(SAMPLE_DIR, "mt_sample.txt")


def _maker():
  return load_script("dev/make_mt_sample")


def _readme_mt_commands():
  """The README's mt_data shell block: [(module or script, [args])] as written."""
  with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
    text = f.read()
  block = text[text.index("## mt_data:"):]
  block = block[block.index("```bash\n") + 8:]
  block = block[:block.index("```")].replace("\\\n", " ")
  return [re.sub(r"\s+#.*", "", line).split() for line in block.splitlines() if line.strip()]


def test_the_sample_is_what_its_script_writes_and_has_its_sources():
  maker = _maker()
  with open(SAMPLE, encoding="utf-8") as f:
    assert f.read() == maker.text()
  pairs = maker.pairs()
  assert len(pairs) == 640 == len({en for en, _ in pairs})
  assert all("\t" not in en + fr and en and fr for en, fr in pairs)
  # The sentences train_seq2seq.py translates by default are in it.
  assert {"Go.", "I lost.", "He's calm.", "I'm home."} <= {en for en, _ in pairs}
  with open(os.path.join(SAMPLE_DIR, "SOURCES.md"), encoding="utf-8") as f:
    sources = f.read()
  assert "mt_sample.txt" in sources and "scripts/dev/make_mt_sample.py" in sources
  assert "Tatoeba" in sources  # says that fra.txt's pairs are not in it


def test_french_agreement_elision_and_negation():
  maker = _maker()
  made = dict([*maker.be_pairs(), *maker.verb_pairs()])
  assert made["She's tired."] == "Elle est fatiguée."
  assert made["We're not ready."] == "Nous ne sommes pas prêts."
  assert made["I'm not angry."] == "Je ne suis pas fâché."
  assert made["They're home."] == "Ils sont chez eux."
  assert made["I like the cat."] == "J'aime le chat."
  assert made["He doesn't like an apple."] == "Il n'aime pas de pomme."
  assert made["She didn't buy my car."] == "Elle n'a pas acheté ma voiture."
  assert made["We ate the bread."] == "Nous avons mangé le pain."
  assert "I eat a bread." not in made and "I eat an apple." in made


def test_the_readme_mt_commands_run_on_the_sample(tmp_path):
  pytest.importorskip("tensorflow")
  commands = _readme_mt_commands()
  assert [c[:3] for c in commands] == [
      ["python", "-m", "mt_data.create"], ["python", "-m", "mt_data.stats"],
      ["python", "scripts/train_seq2seq.py", "--data_dir=out/mt"]]
  create = [a.replace("mt_data/sample/", SAMPLE_DIR + "/") for a in commands[0][1:]]
  assert f"--input_file={SAMPLE}" in create
  r = subprocess.run([sys.executable, *create], capture_output=True, text=True, cwd=tmp_path,
                     timeout=300)
  assert r.returncode == 0, r.stderr
  assert re.fullmatch(r"mt_data: 640 lines, 512 train \+ 128 valid pairs, vocab \d+ source / "
                      r"\d+ target -> out/mt", error_lines(r.stderr)[-1]), r.stderr
  train = [os.path.join(REPO, commands[2][1]), *commands[2][2:]]
  assert "--epochs=30" in train
  train = [a for a in train if not a.startswith("--epochs")] + ["--epochs=2"]  # the test's time
  r = subprocess.run([sys.executable, *train], capture_output=True, text=True, cwd=tmp_path,
                     timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert r.returncode == 0, r.stderr[-3000:]
  result = json.loads(r.stdout)
  assert len(result["loss"]) == 2 and len(result["val_loss"]) == 2  # 128 valid pairs
  assert result["loss"][1] < result["loss"][0]
  r = subprocess.run([sys.executable, *train, "--batch_size=513"], capture_output=True,
                     text=True, cwd=tmp_path, timeout=300)
  assert r.returncode == 2 and error_lines(r.stderr) == [
      "error: --batch_size=513: more than the 512 pairs of the train split at "
      "--data_dir=out/mt; lower --batch_size"]
