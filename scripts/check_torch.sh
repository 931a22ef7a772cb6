#!/usr/bin/env bash
# Runs the PyTorch reader tests in a separate venv (.venv-torch) with the CPU
# build of torch and no TensorFlow. torch is not in the `test` extra: PyPI's
# default build brings GBs of CUDA libraries; `pip install torch==2.13.0`
# takes the CPU wheel where one is provided locally (see README, Readers).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="${TORCH_VENV:-.venv-torch}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.textrecords-installed-torch"
if [ ! -f "$STAMP" ] || [ setup.py -nt "$STAMP" ]; then
  "$VENV/bin/python" -m pip install -q "$TORCH_SPEC"
  "$VENV/bin/python" -m pip install -q -e ".[grain,torch,test]"
  touch "$STAMP"
fi
"$VENV/bin/python" -c "import torch; print('torch', torch.__version__)"
exec "$VENV/bin/python" -m pytest -q -rs "$@" tests/test_readers_frameworks.py \
  "tests/test_no_tensorflow.py::test_readers_never_import_tensorflow"
