"""textrecords: text -> TFRecord training data, with matching tf.data parsers.

The shared core: feature specs, byte-stable Example encoding, TFRecord framing
and atomic sharded writing, metadata sidecars, vocabularies, seeding, input
reading, worker pools and shared command-line flags. Nothing in this package
imports TensorFlow at import time.
"""

__version__ = "0.1.0"
