# Sourced by scripts/demo and scripts/test: creates .venv if missing and installs
# the project with the given extras (re-installs only when setup.py changed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
EXTRAS="$1"
STAMP=".venv/.textrecords-installed-$EXTRAS"
if [ ! -f "$STAMP" ] || [ setup.py -nt "$STAMP" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[$EXTRAS]"
  touch "$STAMP"
fi
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
