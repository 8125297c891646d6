#!/usr/bin/env bash
# Acceptance check of issue 18: fedcomp works from its wheel alone.
#
# Builds the wheel, installs it WITHOUT extras into a fresh virtual environment outside the
# checkout and, from an empty directory, checks that
#   1. `fedcomp list experiments` lists the 16 experiments;
#   2. `fedcomp run seed000 --set rounds=5 --out out` runs and writes out/results.csv;
#   3. an experiment needing a missing extra exits 2 with one `error:` line naming the
#      extra's pip install and no traceback (fedcanon_stepsizes: fedcomp[data];
#      fedcanon_nn and prox_cost: torch);
#   0. the wheel holds fedcomp/py.typed (PEP 561: type checkers read fedcomp's annotations)
#      and the license (*.dist-info/licenses/LICENSE), and its fedcomp.__version__ is the
#      version pyproject.toml declares;
#   4. with the dev and plot extras added, `fedcomp report --quick --only seed000` writes
#      rep/index.html.
# One PASS:/FAIL: line per check; the exit status is 1 when any check failed.
#
# Usage: scripts/wheel_check.sh   (PYTHON=/path/to/python builds the wheel; default: the
# checkout's .venv, else python3). Needs the package index pip is configured with.
set -euo pipefail

# a clean Python environment: an inherited PYTHONPATH (Ray writes one into the process that
# starts it, and subprocesses inherit it) would let pip find the checkout's fedcomp
# "already installed" and put nothing into the fresh venv
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP PYTHONBREAKPOINT PYTHONUSERBASE PIP_TARGET PIP_PREFIX
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON="$(command -v python3)"
EXPERIMENTS=(seed000 bao2022_sparse_regression bao2022_lowrank bao2022_emnist
             fedcanon_stepsizes fedcanon_vs_composite fedcanon_nn feddr_synthetic feddr_async
             feddr_mlp liang2024_linear liang2024_logistic prox_cost condat_bits dp_utility
             fedht_simulation)
LIMIT=900  # seconds for any one command

TMP="$(mktemp -d "${TMPDIR:-/tmp}/fedcomp-wheel.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
FAILED=0
pass() { echo "PASS: $*"; }
fail() {
    echo "FAIL: $*"
    FAILED=$((FAILED + 1))
}
show() { sed 's/^/    | /' "$@" | tail -n 15; }  # the end of a log, indented under its FAIL

# --- build, and install without extras --------------------------------------------------------
if ! "$PYTHON" -m pip wheel -q --no-deps -w "$TMP/dist" "$ROOT" >"$TMP/build.log" 2>&1; then
    fail "build the wheel ($PYTHON -m pip wheel --no-deps)"
    show "$TMP/build.log"
    exit 1
fi
WHEEL="$(ls "$TMP"/dist/fedcomp-*.whl)"

# --- 0. the wheel's contents ------------------------------------------------------------------
contents="$("$PYTHON" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$WHEEL")"
absent=()
grep -qx 'fedcomp/py.typed' <<<"$contents" || absent+=(fedcomp/py.typed)
grep -qE '^fedcomp-[^/]+\.dist-info/licenses/LICENSE$' <<<"$contents" || absent+=(LICENSE)
if [ "${#absent[@]}" -eq 0 ]; then
    pass "$(basename "$WHEEL") holds fedcomp/py.typed and the LICENSE"
else
    fail "$(basename "$WHEEL") lacks: ${absent[*]}"
fi
if ! { "$PYTHON" -m venv "$TMP/venv" &&
       "$TMP/venv/bin/python" -m pip install -q -c "$ROOT/constraints.txt" "$WHEEL"
     } >"$TMP/install.log" 2>&1; then
    fail "install $(basename "$WHEEL") without extras into a fresh venv"
    show "$TMP/install.log"
    exit 1
fi
VPY="$TMP/venv/bin/python"
FEDCOMP="$TMP/venv/bin/fedcomp"
mkdir "$TMP/work" && cd "$TMP/work"  # empty: no configs/, no checkout on the path
unset PYTHONPATH FEDCOMP_DEBUG
export FEDCOMP_CACHE_DIR="$TMP/cache" FEDCOMP_DATA_DIR="$TMP/data"

# the fedcomp of the wheel, and none of the optional packages
where="$("$VPY" -c 'import fedcomp; print(fedcomp.__file__)' 2>&1)" || true
optional="$("$VPY" -c 'import importlib.util as u
print(" ".join(m for m in ("torch", "sklearn", "matplotlib", "flwr") if u.find_spec(m)))')"
declared="$("$PYTHON" -c 'import sys, tomllib
print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$ROOT/pyproject.toml")"
installed="$("$VPY" -c 'import fedcomp; print(fedcomp.__version__)' 2>&1)" || true
if [ "$installed" = "$declared" ]; then
    pass "fedcomp.__version__ of the wheel is pyproject.toml's version ($declared)"
else
    fail "fedcomp.__version__ of the wheel is '$installed', pyproject.toml declares '$declared'"
fi
if [[ "$where" == "$TMP/venv/"* && -z "$optional" ]]; then
    pass "$(basename "$WHEEL") installed without extras; fedcomp imported from the fresh venv"
else
    fail "fresh install: fedcomp from '$where', optional packages present: '$optional'"
fi

# --- 1. the experiments are listed ------------------------------------------------------------
rc=0
timeout "$LIMIT" "$FEDCOMP" list experiments >list.out 2>list.err || rc=$?
missing=()
for name in "${EXPERIMENTS[@]}"; do
    grep -qw -- "$name" list.out || missing+=("$name")
done
if [ "$rc" -eq 0 ] && [ "${#missing[@]}" -eq 0 ]; then
    pass "fedcomp list experiments lists all ${#EXPERIMENTS[@]} experiments"
else
    fail "fedcomp list experiments: exit $rc, missing: ${missing[*]:-none}"
    show list.err
fi

# --- 1b. no command is offered that the wheel cannot run (bench needs benchmarks/) -------------
rc=0
timeout "$LIMIT" "$FEDCOMP" --help >help.out 2>&1 || rc=$?
if [ "$rc" -eq 0 ] && ! grep -qw bench help.out; then
    pass "fedcomp --help does not offer bench (a source checkout's benchmarks/)"
else
    fail "fedcomp --help: exit $rc, or it lists bench, which a wheel cannot run"
    show help.out
fi

# --- 2. the default experiment runs -----------------------------------------------------------
rc=0
timeout "$LIMIT" "$FEDCOMP" run seed000 --set rounds=5 --out out --quiet >run.out 2>run.err \
    || rc=$?
if [ "$rc" -eq 0 ] && [ -s out/results.csv ]; then
    pass "fedcomp run seed000 --set rounds=5 --out out wrote out/results.csv"
else
    fail "fedcomp run seed000 --set rounds=5 --out out: exit $rc, out/results.csv $(
        [ -s out/results.csv ] && echo written || echo missing)"
    show run.err
fi

# --- 3. a missing extra is one error line -----------------------------------------------------
# expect_extra NAME PATTERN ARGS...: `fedcomp run NAME ARGS` exits 2 with exactly one stderr
# line, an `error:` matching the extended regex PATTERN, and no traceback
expect_extra() {
    local name="$1" pattern="$2" rc=0
    shift 2
    timeout "$LIMIT" "$FEDCOMP" run "$name" "$@" --out "out-$name" >"$name.out" 2>"$name.err" \
        || rc=$?
    local lines
    lines="$(wc -l <"$name.err")"
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qE "^error: .*$pattern" "$name.err" &&
        ! grep -q Traceback "$name.err"; then
        pass "fedcomp run $name without its extra: exit 2, one line: $(cat "$name.err")"
    else
        fail "fedcomp run $name without its extra: exit $rc, $lines stderr line(s), want one" \
             "'error:' line matching $pattern"
        show "$name.err"
    fi
}
expect_extra fedcanon_stepsizes "pip install 'fedcomp\[data\]'" --set rounds=1
# fedcanon_nn needs scikit-learn (digits) as well: one line names both extras
expect_extra fedcanon_nn "pip install 'fedcomp\[([a-z]+,)*torch(,[a-z]+)*\]'" --set rounds=1
expect_extra prox_cost "pip install 'fedcomp\[torch\]'"

# --- 4. the report, with the dev and plot extras ----------------------------------------------
if ! "$VPY" -m pip install -q -c "$ROOT/constraints.txt" "$WHEEL[dev,plot]" \
        >"$TMP/extras.log" 2>&1; then
    fail "install $(basename "$WHEEL")[dev,plot]"
    show "$TMP/extras.log"
else
    rc=0
    timeout "$LIMIT" "$FEDCOMP" report --quick --only seed000 --out rep >report.out \
        2>report.err || rc=$?
    if [ "$rc" -eq 0 ] && [ -s rep/index.html ]; then
        pass "fedcomp report --quick --only seed000 --out rep wrote rep/index.html"
    else
        fail "fedcomp report --quick --only seed000 --out rep: exit $rc, rep/index.html $(
            [ -s rep/index.html ] && echo written || echo missing)"
        show report.err
    fi
fi

if [ "$FAILED" -gt 0 ]; then
    echo "wheel check: $FAILED check(s) failed"
    exit 1
fi
echo "wheel check: all checks passed"
