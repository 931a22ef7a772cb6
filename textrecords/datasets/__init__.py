"""A dataset on disk: its paths, metadata, offset index and how it is written.

`layout` names every path of a dataset, `metadata` owns the JSON written last
beside the shards, `index` the record offset index, `vocab` the vocab files,
`dataset_writer` writes a dataset as one atomic, resumable unit, `publish`
stages a URL output and publishes it in a kill-safe order, `direct_output` is
the writer Beam workers use in place. Imports `textrecords.files` and the
foundations.
"""
