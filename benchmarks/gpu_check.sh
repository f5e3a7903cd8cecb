#!/usr/bin/env bash
# One pass on a GPU machine, from the repository root: the scale benchmarks on the GPU and,
# side by side on the same machine, on its CPU (JAX_PLATFORMS=cpu); then the quick tier.
# Each step has its own time limit, so that one slow step cannot take the others' time.
# Logs go to $OUT (or ./gpu_check_logs) as <step>.log; the last lines of each are printed.
#
#   bash benchmarks/gpu_check.sh
#
# Where the machine lacks a package of the project's (ml-collections, say), put its wheels
# in .whl/ first: they are installed to /tmp/site and put on PYTHONPATH.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-gpu_check_logs}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
nproc
python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.devices())"

step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name (rc $rc, $((SECONDS - t0)) s)"
  grep -E '^\{' "$OUT/$name.log" | tail -n 2
  [ "$rc" = 0 ] || tail -n 4 "$OUT/$name.log"
}

step scale_gpu 100 python3 benchmarks/bench_warca_scale.py --data_dir /tmp/warca_scale
step scale_cpu 50 env JAX_PLATFORMS=cpu python3 benchmarks/bench_warca_scale.py \
  --data_dir /tmp/warca_scale
step nystroem_gpu 50 python3 benchmarks/bench_warca_scale.py --kernel rbf --num_landmarks 512 \
  --data_dir /tmp/warca_scale
step eval_gpu 70 python3 benchmarks/bench_eval_scale.py
step eval10k_gpu 30 python3 benchmarks/bench_eval_scale.py --num_queries 10000
step eval10k_cpu 35 env JAX_PLATFORMS=cpu python3 benchmarks/bench_eval_scale.py \
  --num_queries 10000
step linear_gpu 35 python3 benchmarks/bench_linear_warca.py
step kernel_gpu 25 python3 benchmarks/bench_kernel_warca.py --candidate_pool=256
step quick_tier 190 python3 -m pytest -m "not slow" -q -p no:cacheprovider
tail -n 25 "$OUT/quick_tier.log"
