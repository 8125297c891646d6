#!/usr/bin/env bash
# The checks that need a GPU, in one pass (CI has none: tests/engines/test_gpu.py skips there).
#
#   bash scripts/gpu_check.sh OUT [PYTHON]
#
# writes env.txt and a file per step to OUT (a device call returns at most 8 files: the
# calls below stay under that), each step's output as it finishes, so that a run stopped
# part-way keeps what it did:
#   env.txt        the GPU, torch's and jax's versions and devices, the load
#   tests.txt      the GPU cases of tests/engines/test_devices.py (every algorithm on kinds
#                  cuda and jax-gpu; the CPU stand-ins are CI's) and test_backends.py,
#                  tests/engines/test_gpu.py and test_timing_devices.py
#   launches.txt   benchmarks/launch_counts.py: host launches (kernel and CUDA-graph) and
#                  kernels executed a network round, torch eager and the jax engine with and
#                  without XLA's command buffers, unrolled and rolled local steps, as K and the
#                  clients a round grow (issue 46)
#   frameworks.txt benchmarks/frameworks.py --check: one FedAvg round of ResNet-18 at
#                  CIFAR-10's shape, 100 clients x batch 32, in fedcomp, pfl 0.6 and Flower's
#                  simulation (those two need scripts/gpu_wheels.sh's wheels; without them
#                  they are reported as not installed), the centralized floor, TFLOP/s and
#                  the share of the peak; fedcomp both with its block batched (grouped
#                  convolutions) and client by client (--client-loop), to pick the GPU's way
#   big.txt        benchmarks/gpu.py at 10^6 x 20 x 10 (ZA1, every engine that fits), 10^7
#                  x 10 x 10 in float64 (the device engines) and 10^8 x 10 x 2 in float32
#                  (the jax engine: 8 GB of data), the data made on the GPU, each checked
#                  against NumPy on its first 1000 clients (issue 46)
#   jax_networks.txt  benchmarks/jax_networks.py --device gpu: feddr_mlp / fedcanon_nn rounds,
#                  torch eager on cuda vs the jax compiled engine on jax's GPU, the jitted
#                  centralized floor, and torch eager on the host's cores (issue 46)
#                  then both at 200 rounds, jax and the floor only (--no-torch): a 0.3 ms
#                  round needs that many for its slope; with the local steps unrolled too
#                  (--compare-unrolled), to say whether rolled steps suit the GPU
#   rounds.txt     benchmarks/gpu.py --device cuda, one size at a time (ms per ZA1 round,
#                  every engine, against the memory roofline): 10^4 x 1000 x 20 in the
#                  default pass (issue 46's roofline), the other sizes with "recheck"
# and, with GPU_CHECK_STEPS naming them ("recheck" names all four: each was measured on an
# H200 or an H100 before, and is a re-check):
#   rounds.txt     also 100 x 1024, 1000 x 100 and 100000 x 100 (x 20)
#   networks.txt   benchmarks/gpu.py --networks: ms per network round, GPU and host
#   resnet18.txt   fedcomp run fedcanon_resnet18 for one round on the GPU (ResNet-18 at
#                  CIFAR-10's shape; synthetic stand-in images without the files: timing only)
#   prox_cost.txt  fedcomp run prox_cost --set device=cuda (TABLE I of seed 002 on the GPU):
#                  the base reading and the readings timing other implementations, each
#                  run's results.csv
# GPU_CHECK_STEPS (default: the pass above; its order is below) picks the steps, e.g.
#   GPU_CHECK_STEPS="jax_networks launches tests" bash scripts/gpu_check.sh OUT
#   GPU_CHECK_STEPS=recheck bash scripts/gpu_check.sh OUT
# Each step has its own time limit (seconds, GPU_CHECK_LIMIT_* below), so one slow step
# cannot eat the others' time, and the whole script has one budget (GPU_CHECK_BUDGET,
# default 570 s: a device call may last 10 minutes): a step gets at most what is left of
# it, and a step with under 15 s left is skipped and says so. The default pass's limits add
# up to the budget (75 + 95 + 140 + 130 + 100 + 30 s): every check of issue 46 in one
# call of 10 minutes, each sized from the H100 session of 2026-11-27 (the device tests took
# 89 s for all 392 of their cases, 176 of them the GPU's; ResNet-18 trained at 19-26
# TFLOP/s). A step that meets its limit says so in its file ("rc=124").
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

budget=${GPU_CHECK_BUDGET:-570}
step() {  # step LIMIT FILE COMMAND...: run COMMAND for at most LIMIT s, output added to FILE
    local limit=$1 file=$2
    shift 2
    local left=$((budget - SECONDS))
    if (( left < 15 )); then
        echo "[$*]: skipped, ${left} s of the ${budget} s budget left" >> "$out/$file"
        return
    fi
    (( limit > left )) && limit=$left
    local start=$SECONDS
    echo "[$*]" >> "$out/$file"
    timeout "$limit" "$@" >> "$out/$file" 2>&1
    local rc=$?
    echo "[rc=$rc after $((SECONDS - start)) s, limit $limit s]" >> "$out/$file"
}

workers=$(( $(nproc) > 8 ? 8 : $(nproc) ))
steps=${GPU_CHECK_STEPS:-tests launches frameworks big jax_networks rounds}
steps=${steps/recheck/rounds_recheck networks resnet18 prox_cost}
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
for name in $steps; do
case $name in
tests)
    step "${GPU_CHECK_LIMIT_TESTS:-75}" tests.txt "$py" -m pytest -q -p no:cacheprovider \
        -n "$workers" -o addopts="-ra --strict-markers" -k "cuda or gpu or timing_devices" \
        tests/engines/test_devices.py tests/engines/test_gpu.py \
        tests/engines/test_timing_devices.py tests/engines/test_backends.py ;;
rounds)
    step "${GPU_CHECK_LIMIT_ROOFLINE:-30}" rounds.txt "$py" benchmarks/gpu.py --device cuda \
        --sizes 10000x1000x20 --engines jax,jax-hand,torch,torch-hand --repeats 1 --blocks 3 ;;
rounds_recheck)
    for size in ${GPU_CHECK_SIZES:-100x1024x20 1000x100x20 100000x100x20}; do
        step "${GPU_CHECK_LIMIT_SIZE:-60}" rounds.txt "$py" benchmarks/gpu.py \
            --device cuda --sizes "$size" --repeats 2 --blocks 3
    done ;;
prox_cost)
    for reading in as_written host_float64 per_tensor; do
        step "${GPU_CHECK_LIMIT_PROX:-45}" prox_cost.txt "$py" -m fedcomp run prox_cost \
            --reading "$reading" --set device=cuda --out "$runs/$reading"
        cat "$runs/$reading/results.csv" >> "$out/prox_cost.txt" 2>&1
    done ;;
networks)
    step "${GPU_CHECK_LIMIT_NETWORKS:-90}" networks.txt "$py" benchmarks/gpu.py --device cuda \
        --sizes 100x1024x20 --repeats 1 --blocks 2 --networks ;;
jax_networks)
    step "${GPU_CHECK_LIMIT_JAX_NETWORKS:-60}" jax_networks.txt "$py" \
        benchmarks/jax_networks.py --device gpu --rounds 20 --repeats 2
    step "${GPU_CHECK_LIMIT_MLP_SLOPE:-40}" jax_networks.txt "$py" \
        benchmarks/jax_networks.py --device gpu --no-torch --rounds 200 --repeats 2 \
        --compare-unrolled ;;
launches)
    step "${GPU_CHECK_LIMIT_LAUNCHES:-95}" launches.txt "$py" benchmarks/launch_counts.py \
        --rounds 4 ;;
frameworks)
    step "${GPU_CHECK_LIMIT_FRAMEWORKS:-140}" frameworks.txt "$py" benchmarks/frameworks.py \
        --check --client-loop ;;
big)
    step "${GPU_CHECK_LIMIT_BIG:-45}" big.txt "$py" benchmarks/gpu.py --device cuda \
        --sizes 1000000x20x10 --repeats 1 --blocks 2
    step "${GPU_CHECK_LIMIT_BIG7:-45}" big.txt "$py" benchmarks/gpu.py --device cuda \
        --sizes 10000000x10x10 --engines jax,jax-hand,torch,torch-hand --repeats 1 --blocks 2
    step "${GPU_CHECK_LIMIT_BIG8:-40}" big.txt "$py" benchmarks/gpu.py --device cuda \
        --sizes 100000000x10x2 --dtype float32 --engines jax --repeats 1 --blocks 2 ;;
resnet18)
    step "${GPU_CHECK_LIMIT_RESNET:-120}" resnet18.txt "$py" -m fedcomp run fedcanon_resnet18 \
        --set rounds=1 --set eval_every=1 --set backend=cuda --seeds 0 --jobs 1 \
        --reading as_written --out "$runs/resnet18"
    cat "$runs/resnet18/results.csv" >> "$out/resnet18.txt" 2>&1 ;;
*)
    echo "unknown step $name (steps: tests launches frameworks big jax_networks rounds, and recheck: rounds_recheck networks resnet18 prox_cost)" >> "$out/env.txt" ;;
esac
done
uptime >> "$out/env.txt"
