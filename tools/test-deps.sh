#!/usr/bin/env bash
# Run the test suite against the declared minimums or the newest releases of every dependency, each in a fresh
# virtual environment (docs/ci.md, "Dependency ranges").
#
#   tools/test-deps.sh min     # every runtime and test dependency at its declared lower bound, exactly
#   tools/test-deps.sh newest  # the newest release of each within its declared range
#   PYTHON=python3.13 tools/test-deps.sh min -x   # another interpreter; arguments after the mode go to pytest
#
# Either runs the whole suite, the tests marked slow too (--run-slow, tests/conftest.py).
#
# The `==` pins of `min` come from pyproject.toml (tools/dep_pins.py), not from a list kept by hand. Wheels
# only: a minimum that would have to be compiled for this Python is not one this Python supports.
# Exit status: pip's if an install fails, else pytest's (5, no tests collected, fails too); 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"
case "$mode" in
    min | newest) shift ;;
    *) echo "usage: tools/test-deps.sh min|newest [pytest arguments...]" >&2; exit 2 ;;
esac
python="${PYTHON:-python3}"

unset PYTHONPATH PYTHONHOME PYTHONSTARTUP PIP_USER VIRTUAL_ENV
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$python" -m venv "$scratch/venv"
# shellcheck disable=SC1091  # created just above
. "$scratch/venv/bin/activate"
pip_quiet=(--quiet --disable-pip-version-check)

if [ "$mode" = min ]; then
    # tools/dep_pins.py reads pyproject.toml with tomllib, which Python 3.10 lacks: tomli (a declared
    # dependency there) first; the pins below then put it at its own minimum.
    python -c "import tomllib" 2>/dev/null || pip install "${pip_quiet[@]}" tomli
    python tools/dep_pins.py min > "$scratch/pins.txt"
    echo "== declared minimums for $(python -c 'import sys; print("Python %d.%d" % sys.version_info[:2])'):"
    sed 's/^/   /' "$scratch/pins.txt"
    pip install "${pip_quiet[@]}" --only-binary=:all: -r "$scratch/pins.txt"
    # kvplan itself, its dependencies held at the pins by the constraints file.
    pip install "${pip_quiet[@]}" -c "$scratch/pins.txt" '.[test]'
else
    pip install "${pip_quiet[@]}" --upgrade --upgrade-strategy eager '.[test]'
fi

echo "== installed ($mode):"
python - <<'PY'
import sys
sys.path.insert(0, "tools")
from importlib import metadata
import dep_pins
for req in dep_pins.declared():
    if req.applies:
        print(f"   {req.name}=={metadata.version(req.name)}    (declared {req.text.split(';')[0]})")
PY

set +e
python -m pytest -p no:cacheprovider --run-slow "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "tools/test-deps.sh: pytest collected no tests (exit 5): that is a failure" >&2
fi
echo "== tools/test-deps.sh $mode: pytest exited $status"
exit "$status"
