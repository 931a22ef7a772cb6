#!/usr/bin/env bash
# Trains the tiny BERT on JAX fed by grain (scripts/train_bert_tiny_jax.py) in a
# separate venv (.venv-jax) without TensorFlow, through its test. jax is not in
# the `test` extra: it adds ~600 MB and minutes of install time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="${JAX_VENV:-.venv-jax}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.textrecords-installed-jax"
if [ ! -f "$STAMP" ] || [ setup.py -nt "$STAMP" ]; then
  "$VENV/bin/python" -m pip install -q jax keras
  "$VENV/bin/python" -m pip install -q -e ".[grain,test]"
  touch "$STAMP"
fi
KERAS_BACKEND=jax "$VENV/bin/python" -c "import jax, keras; print('jax', jax.__version__, 'keras', keras.__version__)"
exec "$VENV/bin/python" -m pytest -q -rs "$@" tests/test_train_jax.py
