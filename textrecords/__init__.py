"""textrecords: text -> TFRecord training data, with matching tf.data parsers.

The shared core, in rooms whose imports run one way (each only imports the
rooms listed before it; `tests/test_import_cycles.py` checks it):

- `errors`, `seeding`, `tf_import`, `lazy_exports`, `interrupts`: foundations every
  room uses (`interrupts`: Ctrl-C while a command starts is one line, exit 130).
- `files/`: local paths and storage URLs, atomic files, TFRecord framing, text input.
- `wire/`: the tf.train.Example wire format (feature specs, encoder, decoder, varints).
- `datasets/`: a dataset on disk: layout, metadata, offset index, writer, publishing.
- `reading/`: reading datasets back: locations, the read order, tf.data and TF-free readers.
- `engine/`: where a generator's units run: local worker pools, Apache Beam.
- `runs/`: the create skeleton every generator shares, run options and the CLI.
- `index` (the `python -m textrecords.index` command).

Nothing in this package imports TensorFlow at import time.
"""

__version__ = "0.1.0"

# First thing every command imports: from here on, Ctrl-C during its imports is
# `error: interrupted` and exit 130 (only in a command's process).
from textrecords import interrupts as _interrupts  # pylint: disable=wrong-import-position

_interrupts.install_for_commands()
