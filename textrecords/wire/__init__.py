"""The tf.train.Example wire format, without TensorFlow.

Feature specs and their JSON and `tf.io` forms (`features`), byte-stable
encoding (`example_encoder`), batched numpy decoding (`example_decoder`, with
optional numba loops in `example_kernels`) and the one varint implementation
(`varint`). Imports `textrecords.files` (framing) and the foundations.
"""
