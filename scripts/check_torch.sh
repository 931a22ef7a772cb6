#!/usr/bin/env bash
# Runs the PyTorch reader tests in a separate venv (.venv-torch) with the CPU
# build of torch and no TensorFlow. torch is not in the `test` extra: PyPI's
# default build brings GBs of CUDA libraries; `pip install torch==2.13.0`
# takes the CPU wheel where one is provided locally (see README, Install).
source "$(dirname "$0")/_venv.sh" grain,torch,test "${TORCH_VENV:-.venv-torch}" \
  "${TORCH_SPEC:-torch==2.13.0}"
"$VPY" -c "import torch; print('torch', torch.__version__)"
exec "$VPY" -m pytest -q -rs "$@" tests/test_readers_frameworks.py \
  "tests/test_no_tensorflow.py::test_readers_never_import_tensorflow"
