#!/usr/bin/env bash
# Creates .venv (Python 3.12) and installs ttnn_eager with every pinned dependency (requirements/lock.txt).
# Safe to run again: an existing .venv is reused and brought up to the lock file.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python312() {
    local c
    for c in "${PYTHON:-}" python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12 \
             "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /root/.pyenv/versions/3.12*/bin/python3.12; do
        [ -n "$c" ] || continue
        if "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1; then
            command -v "$c" || echo "$c"; return 0
        fi
    done
    return 1
}

if [ ! -x .venv/bin/python ]; then
    PY=$(find_python312) || { echo "setup: Python 3.12 not found (ttnn 0.81.1 ships wheels for 3.10 and 3.12 only). Set PYTHON=/path/to/python3.12." >&2; exit 1; }
    echo "setup: creating .venv with $PY"
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# The lock file pins everything (torch 2.14.1, ttnn 0.81.1, numpy<2, transformers, test tools).
.venv/bin/python -m pip install --quiet -c requirements/lock.txt -r requirements/lock.txt
.venv/bin/python -m pip install --quiet --no-deps -e .
# The ttnn device's C++ hooks (src/ttnn_eager/csrc/hooks.cpp: pinned memory, the device guard), built once per
# torch version against the wheel's own headers into the cache (src/ttnn_eager/core/native.py); a failure stops
# the set-up here with the compiler's message and the fix, and leaves nothing to load.
.venv/bin/python -c '
import sys
try:
    from ttnn_eager.core import native
except Exception as err:
    while err.__cause__ is not None:  # import torch autoloads the backend: the build error is the cause
        err = err.__cause__
    sys.exit(f"setup: {err}")
print("setup: device hooks", native.library_path())'
.venv/bin/python -c "import torch, ttnn_eager; print('setup: ok, torch', torch.__version__, '| device', torch.device('ttnn:0'))"
