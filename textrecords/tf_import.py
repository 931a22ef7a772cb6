"""Lazy TensorFlow import with an install hint instead of a bare ImportError."""

_HINT = ("TensorFlow is required for this module but is not installed. "
         "Install it with `pip install 'textrecords[cpu]'` (CPU) or "
         "`pip install 'textrecords[gpu]'` (NVIDIA GPU).")


def require_tf():
  """Returns the `tensorflow` module or raises ImportError with an install hint."""
  try:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ImportError(_HINT) from e
  return tf
