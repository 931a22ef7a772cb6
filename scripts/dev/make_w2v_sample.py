#!/usr/bin/env python3
"""Writes w2v_data/sample/word_classes.txt: generated text whose words come in classes.

The bundled English sample (sample_text.txt, 5,908 tokens) is far too small
for word vectors: every word's neighbours sit at cosine ~1. This text is
made so that a few seconds of training show real neighbours: each sentence
fills one of a few templates with words drawn from classes (days, colours,
animals, fruits, ...), so the words of a class share their contexts and
their vectors end up nearest each other. Everything is written here from
scratch (no third-party text); the draws come from `random.Random(SEED)`,
so the file is the same on every run:

  python scripts/dev/make_w2v_sample.py            # rewrites the file
  python scripts/dev/make_w2v_sample.py --check    # exit 1 if the file differs
"""

import os
import random
import sys
from textrecords.runs import script_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "w2v_data", "sample", "word_classes.txt")
SEED = 20261203
NUM_SENTENCES = 6000

CLASSES = {
    "day": "monday tuesday wednesday thursday friday saturday sunday".split(),
    "colour": "red blue green yellow black white brown grey".split(),
    "animal": "cat dog horse cow sheep goat pig rabbit".split(),
    "fruit": "apple pear plum cherry peach lemon orange grape".split(),
    "number": "two three four five six seven eight nine".split(),
    "person": "mother father sister brother aunt uncle cousin grandmother".split(),
    "place": "school market river garden forest village station harbour".split(),
    "weather": "rain snow wind fog frost hail sunshine thunder".split(),
    "went": "walked ran drove rode cycled hurried wandered travelled".split(),
    "tool": "hammer spade knife rope basket ladder bucket shovel".split(),
}
# Words seen next to one class only (a slot's word comes after one of them half
# the time): each class gets contexts of its own, as real words do.
CUES = {
    "day": "early late last next".split(),
    "colour": "bright dark pale deep".split(),
    "animal": "hungry tame wild young".split(),
    "fruit": "ripe sweet sour juicy".split(),
    "number": "about only nearly exactly".split(),
    "person": "dear kind elderly clever".split(),
    "place": "quiet busy crowded empty".split(),
    "weather": "heavy cold sudden endless".split(),
    "went": "slowly quickly calmly happily".split(),
    "tool": "sharp rusty broken sturdy".split(),
}
CUE_RATE = 0.5

TEMPLATES = (
    "on {day} my {person} {went} to the {place}",
    "the {colour} {animal} ate the {fruit} in the {place}",
    "we saw {number} {colour} {animal} near the {place} on {day}",
    "the {weather} came on {day} so the {animal} stayed in the {place}",
    "my {person} bought a {colour} {tool} and {number} {fruit} at the {place}",
    "they {went} past the {place} in the {weather}",
    "the {person} gave the {animal} a {fruit} on {day}",
    "after the {weather} the {colour} {tool} lay by the {place}",
    "her {person} {went} home with {number} {tool} and a {fruit}",
    "there was {weather} all {day} and the {person} stayed at the {place}",
)


def sentences(rng: random.Random, n: int):
  """n sentences, each a template filled with words drawn uniformly from its classes."""
  out = []
  for _ in range(n):
    template = rng.choice(TEMPLATES)
    out.append(template.format_map(_Draw(rng)))
  return out


class _Draw(dict):
  """format_map's mapping: each {class} is a fresh uniform draw from that class."""

  def __init__(self, rng: random.Random):
    super().__init__()
    self._rng = rng

  def __missing__(self, key):
    word = self._rng.choice(CLASSES[key])
    if self._rng.random() < CUE_RATE:
      return f"{self._rng.choice(CUES[key])} {word}"
    return word


def text() -> str:
  """The whole file's text (one sentence a line, ending in a newline)."""
  return "".join(s + "\n" for s in sentences(random.Random(SEED), NUM_SENTENCES))


def main(argv=None) -> int:
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--check", action="store_true", help="exit 1 if the file differs")
  p.add_argument("--out", default=OUT)
  a = p.parse_args(argv)
  want = text()
  if a.check:
    with open(a.out, encoding="utf-8") as f:
      same = f.read() == want
    print(f"{a.out}: {'up to date' if same else 'differs: rerun without --check'}")
    return 0 if same else 1
  tmp = a.out + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(want)
  os.replace(tmp, a.out)
  print(f"wrote {a.out}: {NUM_SENTENCES} sentences, {len(want.split())} tokens")
  return 0


if __name__ == "__main__":
  sys.exit(main())
