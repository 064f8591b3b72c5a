#!/usr/bin/env bash
# The GPU benchmarks in one call on a lent one-GPU machine (the workplace's device tool):
# single_accelerator.py, first_step.py (W1, W2) and launch_cost.py, each under its own
# time limit, their output under $OUT (default /tmp/gpu_session) as it is printed.
#
# Run from the repository root on a machine whose python3 has jax with a GPU backend:
#   bash benchmarks/gpu_session.sh
# The project is installed (no dependencies, no network) into /tmp/site and the
# benchmarks run from a copy outside the checkout, so that they import the installed
# package and not the source folders (jaxpp_mlir.runtime lives in runtime/).
set -u
OUT=${OUT:-/tmp/gpu_session}
mkdir -p "$OUT"
ROOT=$(pwd)
python3 -m pip install -q --no-deps --no-index --no-build-isolation --no-compile \
    --target /tmp/site "$ROOT" >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
rm -rf /tmp/bench && cp -r "$ROOT/benchmarks" /tmp/bench
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd /tmp
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, jax.devices())'
    nproc
} >"$OUT/device.txt" 2>&1
cat "$OUT/device.txt"

run() {  # run NAME SECONDS ARGS...: one benchmark, its stdout and stderr kept apart
    local name=$1 seconds=$2
    shift 2
    local begin=$SECONDS
    timeout "$seconds" python3 "/tmp/bench/$name.py" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
    echo "== $name: exit $? after $((SECONDS - begin)) s (limit $seconds s)"
    tail -n 40 "$OUT/$name.out"; tail -n 8 "$OUT/$name.err"
}
run single_accelerator "${SINGLE_S:-150}" --steps 10 --warmup 2
run first_step "${FIRST_STEP_S:-220}" --workloads W1,W2 --rounds 3
run launch_cost "${LAUNCH_S:-120}" --reps 100
