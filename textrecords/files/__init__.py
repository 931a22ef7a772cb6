"""Files: where bytes live and how they are framed.

Local paths and storage URLs (`storage`: gs://, s3://, hdfs://, memory://
through fsspec), one file written atomically (`atomic_file`, `writeback`),
content hashes (`hashing`), TFRecord framing and checked reading (`tfrecord`),
checked UTF-8 text input in byte ranges of whole lines (`text_input`), bounded-
memory ordering on disk (`spill`) and the advisory output lock (`output_lock`).
Imports only the foundations (`textrecords.errors`).
"""
