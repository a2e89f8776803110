#!/usr/bin/env bash
# The engines the emitted files are for, installed from PyPI into a fresh virtual environment, and in it the
# `engines`-marked tests with the engines required (docs/engine-memory.md, docs/ci.md "The engines job").
#
#   tools/test-engines.sh                 # a scratch venv, removed afterwards; runs `pytest -m engines`
#   tools/test-engines.sh DIR             # the venv at DIR (made if absent, kept): then `. DIR/bin/activate`
#                                         # and `python tools/engine_check.py` runs in it too
#   tools/test-engines.sh DIR -x          # arguments after DIR go to pytest
#
# vLLM 0.33.0 installs with its dependencies (~9 GB; its CPU platform runs its config classes without a GPU).
# SGLang 0.5.23 and LMCache 0.5.6 pin torch, transformers and xgrammar releases other than vLLM's, so they go in
# with --no-deps, and beside them only what their config modules import (sglang.srt.server_args and its
# resolution pipeline: IPython, gguf). KVPLAN_REQUIRE_ENGINES=1 turns a test that would skip because an engine
# does not import into a failure. Exit status: pip's if an install fails, else pytest's (5, none collected, too).
set -euo pipefail
cd "$(dirname "$0")/.."

unset PYTHONPATH PYTHONHOME PYTHONSTARTUP PIP_USER VIRTUAL_ENV
python="${PYTHON:-python3}"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    venv="$1"
    shift
else
    venv="$(mktemp -d)/venv"
    trap 'rm -rf "$(dirname "$venv")"' EXIT
fi
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# shellcheck disable=SC1091  # created just above
. "$venv/bin/activate"
pip_quiet=(--quiet --disable-pip-version-check)

pip install "${pip_quiet[@]}" -e '.[test]'
pip install "${pip_quiet[@]}" vllm==0.33.0
pip install "${pip_quiet[@]}" --no-deps sglang==0.5.23 lmcache==0.5.6
pip install "${pip_quiet[@]}" IPython==9.18.1 gguf==0.19.0

set +e
KVPLAN_REQUIRE_ENGINES=1 python -m pytest -m engines "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "tools/test-engines.sh: pytest collected no engines tests (exit 5): that is a failure" >&2
fi
exit "$status"
