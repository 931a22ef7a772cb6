"""textrecords: text -> TFRecord training data (BERT, word2vec, translation)."""

import re

from setuptools import find_packages, setup

with open("textrecords/__init__.py", encoding="utf-8") as f:
  VERSION = re.search(r'__version__ = "([^"]+)"', f.read()).group(1)

setup(
    name="textrecords",
    version=VERSION,
    description="Turn raw text into TFRecord training data with matching tf.data parsers.",
    packages=find_packages(include=["textrecords", "textrecords.*", "bert_data",
                                    "bert_data.*", "w2v_data", "w2v_data.*",
                                    "mt_data", "mt_data.*"]),
    package_data={"bert_data": ["sample/*"], "mt_data": ["sample/*"], "w2v_data": ["sample/*"]},
    python_requires=">=3.10",
    install_requires=[
        "absl-py>=1.0",
        "numpy>=1.24",
        "tokenizers>=0.15",
        "google-crc32c>=1.5",
    ],
    entry_points={
        "console_scripts": [
            "bert-data-create = bert_data.create:entry_point",
            "bert-data-inspect = bert_data.inspect:entry_point",
            "bert-data-stats = bert_data.stats:entry_point",
            "bert-data-build-vocab = bert_data.build_vocab:entry_point",
            "w2v-data-create = w2v_data.create:entry_point",
            "mt-data-create = mt_data.create:entry_point",
            "mt-data-stats = mt_data.stats:entry_point",
            "textrecords-index = textrecords.index:entry_point",
        ],
    },
    extras_require={
        "cpu": ["tensorflow-cpu>=2.21,<2.22", "numba>=0.60"],
        "gpu": ["tensorflow[and-cuda]>=2.21,<2.22"],
        "plot": ["matplotlib>=3.7"],
        "spm": ["sentencepiece>=0.2"],
        "storage": ["fsspec>=2023.1"],
        "gcs": ["fsspec>=2023.1", "gcsfs>=2023.1"],
        "s3": ["fsspec>=2023.1", "s3fs>=2023.1"],
        "hdfs": ["fsspec>=2023.1", "pyarrow>=14"],
        # The TF-free readers (textrecords.reading.grain_reader, torch_reader), with
        # numba for the example decoder's compiled walk (without it: the Python path).
        "grain": ["grain>=0.2,<0.3", "numba>=0.60"],
        "torch": ["torch>=2.1", "numba>=0.60"],
        # scripts/train_bert_tiny_jax.py: Keras 3 on JAX fed by grain, no TensorFlow.
        "jax": ["jax>=0.4", "keras>=3", "grain>=0.2,<0.3", "numba>=0.60"],
        "beam": ["apache-beam[tfrecord]>=2.77,<2.78"],
        # --engine=dask: dask.distributed itself (not Beam's DaskRunner).
        "dask": ["dask[distributed]>=2024.1"],
        # Compiled kernels (numba): bert_data's reference-compatible walk, w2v_data's
        # sampling and record encoding (the same bytes as without it), the example
        # decoder's walk (the same arrays).
        "fast": ["numba>=0.60"],
        "test": ["pytest>=7", "hypothesis>=6", "psutil>=5", "matplotlib>=3.7",
                 "sentencepiece>=0.2", "fsspec>=2023.1", "s3fs>=2023.1", "moto[server]>=5",
                 "gcsfs>=2023.1", "gcp-storage-emulator>=2024",
                 "grain>=0.2,<0.3", "apache-beam[tfrecord]>=2.77,<2.78", "numba>=0.60",
                 "dask[distributed]>=2024.1"],
    },
)
