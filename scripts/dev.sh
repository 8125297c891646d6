#!/usr/bin/env bash
# One script behind the Makefile (for machines without make):
#   scripts/dev.sh setup | demo | test | test-fast | lint | bench
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PY="$VENV/bin/python"
STAMP="$VENV/.fedcomp-installed"

setup() {
    if [ ! -x "$PY" ]; then
        python3 -m venv "$VENV"
    fi
    local extras="dev,plot,flower,jax"  # jax: the compiled engine's tests
    local pip_args=(-q -c constraints.txt)
    # torch only from the local CPU wheel: never let pip fetch a CUDA build
    if ls /opt/wheels/torch-2.13.0* >/dev/null 2>&1; then
        extras="$extras,torch"
        pip_args+=(--find-links /opt/wheels)
    fi
    if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ constraints.txt -nt "$STAMP" ]; then
        echo "installing fedcomp[$extras] into $VENV ..." >&2
        "$PY" -m pip install "${pip_args[@]}" -e ".[$extras]"
        touch "$STAMP"
    fi
}

# The demo needs only the core and matplotlib (its plot): a fresh clone's `make demo`
# installs those (tens of seconds), not the test extras (minutes); a venv set up for the
# tests already has them.
setup_demo() {
    if [ -f "$STAMP" ] && [ ! pyproject.toml -nt "$STAMP" ]; then
        return
    fi
    if [ ! -x "$PY" ]; then
        python3 -m venv "$VENV"
    fi
    if [ ! -f "$VENV/.fedcomp-demo" ] || [ pyproject.toml -nt "$VENV/.fedcomp-demo" ]; then
        echo "installing fedcomp[plot] into $VENV ..." >&2
        "$PY" -m pip install -q -c constraints.txt -e ".[plot]"
        touch "$VENV/.fedcomp-demo"
    fi
}

case "${1:-test}" in
    setup) setup ;;
    demo) setup_demo; "$VENV/bin/fedcomp" run "${@:2}" ;;
    # both cores: tests that share ports, Ray or signals run on one worker
    # (tests/conftest.py's SERIAL_MODULES, --dist loadgroup); FEDCOMP_TEST_WORKERS=0 runs
    # the suite in this one process
    test) setup; "$PY" -m pytest -n "${FEDCOMP_TEST_WORKERS:-2}" --dist loadgroup "${@:2}" ;;
    test-fast) setup; "$PY" -m pytest -m "not slow" "${@:2}" ;;
    lint) setup; "$VENV/bin/ruff" check fedcomp tests benchmarks examples; "$VENV/bin/mypy" fedcomp ;;
    bench) setup; "$PY" benchmarks/round_time.py "${@:2}" ;;
    *) echo "usage: scripts/dev.sh setup|demo|test|test-fast|lint|bench" >&2; exit 2 ;;
esac
