"""Runs: the create skeleton and command line every generator shares.

`run` (`GeneratorRun`: locks, destination checks, fingerprint, resume /
already complete / overwrite, scratch, finalize, cleanup; and the creates'
`main`), `run_options` (the settings every generator shares) and `cli` (shared
flags, progress, summaries, one-line errors). Imports every other room.
"""
