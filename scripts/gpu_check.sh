#!/usr/bin/env bash
# The checks that need a GPU, in one pass (CI has none: tests/engines/test_gpu.py skips there).
#
#   bash scripts/gpu_check.sh OUT [PYTHON]
#
# writes six files to OUT, each step's output as it finishes, so that a run stopped
# part-way keeps what it did:
#   env.txt        the GPU, torch's and jax's versions and devices, the load
#   tests.txt      tests/engines/test_devices.py (every algorithm on the GPU, kinds cuda and
#                  jax-gpu, beside the CPU stand-ins), tests/engines/test_gpu.py and the device
#                  tests of test_timing_devices.py and test_backends.py
#   rounds.txt     benchmarks/gpu.py --device cuda, one size at a time (ms per ZA1 round,
#                  every engine, against the memory roofline)
#   prox_cost.txt  fedcomp run prox_cost --set device=cuda (TABLE I of seed 002 on the GPU):
#                  the base reading and the readings timing other implementations, each
#                  run's results.csv
#   networks.txt   benchmarks/gpu.py --networks: ms per network round, GPU and host
#   jax_networks.txt  benchmarks/jax_networks.py --device gpu: feddr_mlp / fedcanon_nn rounds,
#                  torch eager on cuda vs the jax compiled engine on jax's GPU, and the jitted
#                  centralized floor (issue 46; prepared, NOT yet run on a GPU)
# Each step has its own time limit (seconds, GPU_CHECK_LIMIT_* below), so one slow step
# cannot eat the others' time.
set -u
out=${1:?usage: scripts/gpu_check.sh OUT [PYTHON]}
py=${2:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# jax takes 75 % of the GPU's memory at its first array unless told not to; the pytest
# workers and torch share the GPU here
export XLA_PYTHON_CLIENT_PREALLOCATE=false

{
    nvidia-smi -L 2>&1
    "$py" -c 'import torch, numpy, scipy; print("torch", torch.__version__, "cuda",
torch.version.cuda, torch.cuda.get_device_name(0), "| numpy", numpy.__version__, "| scipy",
scipy.__version__)' 2>&1
    "$py" -c 'import jax; print("jax", jax.__version__, jax.devices())' 2>&1
    nproc; uptime
} > "$out/env.txt"

step() {  # step LIMIT FILE COMMAND...: run COMMAND for at most LIMIT s, output added to FILE
    local limit=$1 file=$2
    shift 2
    local start=$SECONDS
    echo "[$*]" >> "$out/$file"
    timeout "$limit" "$@" >> "$out/$file" 2>&1
    local rc=$?
    echo "[rc=$rc after $((SECONDS - start)) s, limit $limit s]" >> "$out/$file"
}

workers=$(( $(nproc) > 8 ? 8 : $(nproc) ))
step "${GPU_CHECK_LIMIT_TESTS:-240}" tests.txt "$py" -m pytest -q -p no:cacheprovider \
    -n "$workers" -o addopts="-ra --strict-markers" \
    tests/engines/test_devices.py tests/engines/test_gpu.py tests/engines/test_timing_devices.py tests/engines/test_backends.py

for size in ${GPU_CHECK_SIZES:-100x1024x20 1000x100x20 10000x1000x20 100000x100x20}; do
    step "${GPU_CHECK_LIMIT_SIZE:-60}" rounds.txt "$py" benchmarks/gpu.py \
        --device cuda --sizes "$size" --repeats 2 --blocks 3
done

runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
for reading in as_written host_float64 per_tensor; do
    step "${GPU_CHECK_LIMIT_PROX:-45}" prox_cost.txt "$py" -m fedcomp run prox_cost \
        --reading "$reading" --set device=cuda --out "$runs/$reading"
    cat "$runs/$reading/results.csv" >> "$out/prox_cost.txt" 2>&1
done

step "${GPU_CHECK_LIMIT_NETWORKS:-90}" networks.txt "$py" benchmarks/gpu.py --device cuda \
    --sizes 100x1024x20 --repeats 1 --blocks 2 --networks
step "${GPU_CHECK_LIMIT_JAX_NETWORKS:-120}" jax_networks.txt "$py" benchmarks/jax_networks.py \
    --device gpu --rounds 20 --repeats 3
uptime >> "$out/env.txt"
