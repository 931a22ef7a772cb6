"""The one exception type that reaches users as a one-line message."""


class UserError(ValueError):
  """Bad input, flags or environment; the CLI prints it as one line and exits 2.

  The message must name what is wrong (file, line, flag) and how to fix it.
  """


class MissingFileError(UserError, FileNotFoundError):
  """A file the user named does not exist (also a FileNotFoundError)."""
