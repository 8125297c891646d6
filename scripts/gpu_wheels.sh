#!/usr/bin/env bash
# The wheels a lent GPU machine needs for scripts/gpu_check.sh beyond its image, downloaded
# here (the GPU machine reaches no package index), for Python 3.12 on x86-64 Linux.
#
#   bash scripts/gpu_wheels.sh [DIR]       (DIR defaults to .whl; add it to .git/info/exclude)
#
# Two sets:
#   DIR/core/*.whl   fedcomp's own needs and the frameworks step's (pfl 0.6, Flower 1.42 and
#                    what they import that the image lacks), about 18 MB, --no-deps pinned:
#                    the image already holds NumPy, SciPy, torch, jax, pandas, grpcio, ...
#   DIR/ray/part-*   Ray 2.55.1 (Flower's simulation engine), a 74 MB wheel cut in parts of
#                    PART_MB (default 30) MB
# A device call carries at most 64 MiB with the repository's tracked files (about 45 MB, most
# of it docs/report, which the GPU checks do not read), and Ray alone is 74 MB. So Ray takes
# two calls, back to back (the machine is kept only 30 s after a call; /tmp stays while it
# is warm), with docs/report moved aside here for both (move it back, or
# `git checkout docs/report`, after):
#   1. carry [".whl/core", ".whl/ray/part-aa"]; command:
#        cp .whl/ray/part-aa /tmp/ && python3 -m pip install -q --no-index --no-deps
#        --no-compile --target /tmp/site .whl/core/*.whl
#   2. carry [".whl/ray/part-ab", ".whl/ray/part-ac"]; command:
#        cat /tmp/part-aa .whl/ray/part-a[b-z] > /tmp/ray-2.55.1-cp312-cp312-manylinux2014_x86_64.whl
#        && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site
#        /tmp/ray-*.whl && export PYTHONPATH=/tmp/site:$PWD && bash scripts/gpu_check.sh ...
# Without Ray, run only call 1's install before gpu_check (PYTHONPATH as above): the
# frameworks step then reports Flower's simulation as not installed and runs the rest.
set -euo pipefail
dir=${1:-.whl}
part_mb=${PART_MB:-30}
mkdir -p "$dir/core" "$dir/ray"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64
           --platform manylinux_2_5_x86_64)
get() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" -d "$1" "${@:2}"
}
get "$dir/core" \
    array-api-compat==1.16.0 array-api-strict==2.6.1 tomli-w==1.2.0 \
    pfl==0.6.0 multiprocess==0.70.19 dill==0.4.1 prv-accountant==0.2.0 \
    dp-accounting==0.5.1 dm-tree==0.1.10 \
    flwr==1.42.0 flwr-datasets==0.6.1 datasets==4.8.5 cryptography==50.0.2 cffi==2.1.1 \
    pycparser==3.12 pycryptodome==3.24.1 iterators==0.0.2 tomli==2.5.0 \
    grpcio-health-checking==1.81.1 pydantic==2.14.4 pydantic-core==2.50.5 \
    annotated-types==0.8.0 typing-inspection==0.4.5 sqlalchemy==2.1.9 greenlet==3.5.6 \
    alembic==1.20.1 mako==1.4.3 fastapi==0.138.2 starlette==1.3.1 uvicorn==0.49.0 \
    httptools==0.9.0 python-dotenv==1.2.4 watchfiles==1.3.0 websockets==17.4 \
    jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 \
    rpds-py==2026.9.1 prompt-toolkit==3.0.53 wcwidth==0.9.4 tzdata==2026.6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
get "$tmp" ray==2.55.1
rm -f "$dir"/ray/part-*
split -b "${part_mb}m" "$tmp"/ray-*.whl "$dir/ray/part-"
du -sh "$dir/core" "$dir/ray"
echo "$(ls "$dir"/core/*.whl | wc -l) wheels in $dir/core, Ray in $(ls "$dir"/ray | wc -l) parts"
