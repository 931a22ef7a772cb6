#!/usr/bin/env bash
# Trains a tiny keras_hub.models.BertMaskedLM on bert_data records
# (make_dataset(feature_names="keras_hub")), static and dynamic masking.
#
#   ./scripts/check_keras_hub.sh
#
# keras-hub needs tensorflow-text, whose requirement pulls the full
# `tensorflow` wheel over `tensorflow-cpu`; so this sets up its own venv
# (.venv-keras-hub, or $KERAS_HUB_VENV) with tensorflow-cpu 2.21 and installs
# keras-hub 0.32.0 and tensorflow-text 2.21.1 without their dependencies,
# plus the few they need (regex, rich, kagglehub). Not an install
# requirement of textrecords: tests/test_bert_keras_hub.py is skipped where
# keras_hub is not importable.
source "$(dirname "$0")/_venv.sh" cpu,test "${KERAS_HUB_VENV:-.venv-keras-hub}" \
  "--no-deps keras-hub==0.32.0 tensorflow-text==2.21.1" "regex rich kagglehub"
"$VPY" -c "import keras_hub, tensorflow as tf; print('keras_hub', keras_hub.__version__, 'tensorflow', tf.__version__)"
"$VPY" -m pytest -q -rs tests/test_bert_keras_hub.py "$@"
