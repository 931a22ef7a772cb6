r"""Token-count statistics of an mt_data output, with d2l's paired histogram.

    python -m mt_data.stats --output_dir=out/mt [--split=all|train|valid]
        [--num_steps=9] [--plot=lengths.png]

Counts are tokens per sequence including `<eos>` (as d2l's
`show_list_len_pair_hist`), read back from the record files (checked against
meta.json first). Prints a JSON summary; --plot also saves the histogram of
source and target lengths side by side (needs matplotlib: textrecords[plot]).
"""

import collections
import json
from typing import Dict, List

from absl import flags

from textrecords.runs import cli
from textrecords.wire import example_decoder
from textrecords.datasets import metadata
from textrecords.files import tfrecord
from textrecords.errors import UserError

from mt_data import dataset as mt_dataset
from mt_data import schema

FLAGS = flags.FLAGS


def define_flags():
  cli.define_tool_flags()
  flags.DEFINE_string("output_dir", None, "An output folder of mt_data.create.")
  flags.DEFINE_enum("split", "all", ["all", "train", "valid"], "Which pairs to count.")
  flags.DEFINE_integer("num_steps", 9, "Report how many sequences are longer than this "
                       "(make_dataset trims them).")
  flags.DEFINE_string("plot", None, "Save the paired length histogram to this image file.")


def lengths(output_dir: str, splits) -> Dict[str, List[int]]:
  """Token counts of every source and target sequence of the given splits."""
  found = mt_dataset.open_dataset(output_dir)
  meta = found.meta
  out = {"source": [], "target": []}
  for split in splits:
    names = meta["splits"][split]["files"]
    for path in metadata.verified_files(meta, found.layout, names, verify="size"):
      for rec in tfrecord.read_records(path, meta.get("compression", "")):
        ex = example_decoder.decode_example(rec)
        out["source"].append(len(ex[schema.SOURCE_IDS.name]))
        out["target"].append(len(ex[schema.TARGET_IDS.name]))
  return out


def summarize(lens: Dict[str, List[int]], num_steps: int) -> dict:
  """Per side: count, mean, median, max, share longer than num_steps, histogram.

  >>> summarize({"source": [2, 3, 3], "target": [4, 2, 2]}, 3)["source"]["longer_than_num_steps"]
  0
  """
  out = {}
  for side, values in lens.items():
    vals = sorted(values)
    n = len(vals)
    out[side] = {
        "sequences": n,
        "mean": round(sum(vals) / n, 3) if n else 0.0,
        "median": vals[n // 2] if n else 0,
        "max": vals[-1] if n else 0,
        "longer_than_num_steps": sum(1 for v in vals if v > num_steps),
        "histogram": dict(sorted(collections.Counter(vals).items())),
    }
  return out


def plot(lens: Dict[str, List[int]], path: str, plt=None):
  """Saves d2l-style paired histogram bars of source and target lengths."""
  plt = plt or cli.pyplot()
  fig, ax = plt.subplots(figsize=(5, 3.5))
  _, _, patches = ax.hist([lens["source"], lens["target"]], bins=20)
  ax.set_xlabel("# tokens per sequence")
  ax.set_ylabel("count")
  for patch in patches[1].patches:
    patch.set_hatch("/")
  ax.legend(["source", "target"])
  cli.save_figure(plt, fig, path)


def main(argv):
  if len(argv) > 1:
    raise UserError(f"unexpected arguments {argv[1:]}: every setting is a --flag")
  if not FLAGS.output_dir:
    raise UserError("--output_dir is required")
  cli.check_range("num_steps", FLAGS.num_steps, 1, 1 << 20)
  plt = cli.pyplot() if FLAGS.plot else None
  splits = schema.SPLITS if FLAGS.split == "all" else (FLAGS.split,)
  lens = lengths(FLAGS.output_dir, splits)
  summary = {"splits": list(splits), "num_steps": FLAGS.num_steps,
             **summarize(lens, FLAGS.num_steps)}
  if FLAGS.plot:
    plot(lens, FLAGS.plot, plt)
    summary["plot"] = FLAGS.plot
  print(json.dumps(summary, indent=1))


entry_point = cli.entry_point(define_flags, main)  # the `mt-data-stats` console script


if __name__ == "__main__":
  entry_point()
