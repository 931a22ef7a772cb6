# Sourced by the scripts that need a virtual environment (demo, test, check_*.sh):
#
#   source "$(dirname "$0")/_venv.sh" EXTRAS [VENV [PIP_ARGS...]]
#
# cd's to the repo root, creates VENV (default .venv) if missing and installs
# each PIP_ARGS (one quoted string of `pip install` arguments each, in order:
# what must come before the project, e.g. a CPU-only torch) and then the
# project with EXTRAS. It re-installs only when setup.py or the calling script
# changed, saying each install step in one line on stderr (a first install
# downloads TensorFlow and takes minutes). Sets VPY to the venv's python.
set -euo pipefail
CALLER="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
EXTRAS="$1"
VENV="${2:-.venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating the virtual environment $VENV" >&2
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
STAMP="$VENV/.textrecords-installed-$EXTRAS"
if [ ! -f "$STAMP" ] || [ setup.py -nt "$STAMP" ] || [ "$CALLER" -nt "$STAMP" ]; then
  echo "setup: $VENV: pip install --upgrade pip" >&2
  "$VPY" -m pip install -q --upgrade pip >/dev/null
  for pip_args in "${@:3}"; do
    echo "setup: $VENV: pip install $pip_args" >&2
    # shellcheck disable=SC2086  # each string holds several pip arguments
    "$VPY" -m pip install -q $pip_args
  done
  echo "setup: $VENV: pip install -e '.[$EXTRAS]' (the first time: TensorFlow and" \
    "the other dependencies, a few minutes)" >&2
  "$VPY" -m pip install -q -e ".[$EXTRAS]"
  touch "$STAMP"
fi
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
