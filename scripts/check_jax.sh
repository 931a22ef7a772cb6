#!/usr/bin/env bash
# Trains the tiny BERT on JAX fed by grain (scripts/train_bert_tiny_jax.py) in a
# separate venv (.venv-jax) without TensorFlow, through its test. jax is not in
# the `test` extra: it adds ~600 MB and minutes of install time.
source "$(dirname "$0")/_venv.sh" grain,test "${JAX_VENV:-.venv-jax}" "jax keras"
KERAS_BACKEND=jax "$VPY" -c "import jax, keras; print('jax', jax.__version__, 'keras', keras.__version__)"
exec "$VPY" -m pytest -q -rs "$@" tests/test_train_jax.py
