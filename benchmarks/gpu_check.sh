#!/usr/bin/env bash
# One pass on a GPU machine, from the repository root: the quick tier, then the scale
# benchmarks on the GPU and, side by side on the same machine, on its CPU (JAX_PLATFORMS=cpu).
# Each step has its own time limit, so that one slow step cannot take the others' time.
# Logs go to $OUT (or ./gpu_check_logs): quick_tier.log, and bench.log with every benchmark's
# output; the last lines of each are printed.
#
#   bash benchmarks/gpu_check.sh
#   bash benchmarks/gpu_check.sh protocol VIPER_DIR [BASELINE_CHECKOUT]
#
# The second form runs only the protocol's benchmark: VIPeR's Table 2 row (the documented
# command, 4 workers) for at most 330 s, its stage and method times read from the workdir
# even when it did not finish, then the reduced row with BASELINE_CHECKOUT and with this
# one, side by side.
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

step() {  # step NAME SECONDS COMMAND...: its output appended to $OUT/bench.log
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "== $name: $*" >>"$OUT/bench.log"
  timeout "$limit" "$@" >"/tmp/gpu_check_$name.log" 2>&1
  local rc=$?
  cat "/tmp/gpu_check_$name.log" >>"$OUT/bench.log"
  echo "== $name (rc $rc, $((SECONDS - t0)) s)" | tee -a "$OUT/bench.log"
  grep -E '^\{' "/tmp/gpu_check_$name.log" | tail -n 2
  [ "$rc" = 0 ] || tail -n 4 "/tmp/gpu_check_$name.log"
}

# The quick tier first, spread over 14 processes where pytest-xdist is installed (each of
# the tier's many small programs compiles for the GPU; one process runs it at under half
# the 2-core CPU's pace). --dist loadfile keeps each test file in one process, in order;
# xdist cannot send a test id that is not UTF-8, so that one test runs alone after.
# pytest-benchmark, where installed, warns under xdist, and the suite turns warnings into
# errors: it is switched off.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
if [ "${1:-}" = protocol ]; then
  viper=$(realpath "$2") base=${3:+$(realpath "$3")}
  W=/tmp/gpu_protocol
  step viper_gpu 330 python3 -m benchmarks.bench_protocol --row=viper --viper="$viper" \
    --num_workers=4 --workdir=$W/viper
  python3 -m benchmarks.bench_protocol --analyze=$W/viper/current | tee -a "$OUT/bench.log"
  cp $W/viper/current.log "$OUT/viper_protocol.log" 2>/dev/null && tail -n 15 "$OUT/viper_protocol.log"
  if [ -n "$base" ]; then
    step reduced_gpu 180 python3 -m benchmarks.bench_protocol --row=reduced --viper="$viper" \
      --num_workers=4 --baseline="$base" --workdir=$W/reduced
    tail -n 40 /tmp/gpu_check_reduced_gpu.log
    for w in baseline current; do
      python3 -m benchmarks.bench_protocol --analyze=$W/reduced/$w | tee -a "$OUT/bench.log"
    done
  fi
  exit 0
fi
PYTEST=(python3 -m pytest -m "not slow" -q -p no:cacheprovider -p no:benchmark -rfE)
NON_UTF8=tests/bad_input/test_bad_input_data.py::test_non_utf8_paths
t0=$SECONDS
if python3 -c "import xdist" 2>/dev/null; then
  timeout 200 "${PYTEST[@]}" --durations=10 -n 14 --dist loadfile --deselect "$NON_UTF8" \
    >"$OUT/quick_tier.log" 2>&1
  echo "== quick_tier (rc $?, $((SECONDS - t0)) s, 14 processes)"
  timeout 60 "${PYTEST[@]}" "$NON_UTF8" >>"$OUT/quick_tier.log" 2>&1
  echo "== $NON_UTF8 (rc $?)"
else
  timeout 400 "${PYTEST[@]}" --durations=10 >"$OUT/quick_tier.log" 2>&1
  echo "== quick_tier (rc $?, $((SECONDS - t0)) s, one process)"
fi
tail -n 30 "$OUT/quick_tier.log"

step scale_gpu 90 python3 -m benchmarks.bench_warca_scale --data_dir /tmp/warca_scale
step scale_cpu 45 env JAX_PLATFORMS=cpu python3 -m benchmarks.bench_warca_scale \
  --data_dir /tmp/warca_scale
step eval10k_gpu 30 python3 -m benchmarks.bench_eval_scale --num_queries 10000
step eval10k_cpu 75 env JAX_PLATFORMS=cpu python3 -m benchmarks.bench_eval_scale \
  --num_queries 10000
step nystroem_gpu 90 python3 -m benchmarks.bench_warca_scale --kernel rbf --num_landmarks 512 \
  --data_dir /tmp/warca_scale
step kernel_gpu 60 python3 -m benchmarks.bench_kernel_warca --candidate_pool=256
step linear_gpu 40 python3 -m benchmarks.bench_linear_warca
# the protocol's WARCA columns on the synthetic data: stage times, each grid job's fit share
# (its training against its wall time), the GPU's vmapped grid against the CPU's loop
step protocol_gpu 240 python3 -m benchmarks.bench_protocol --row=synthetic
step protocol_cpu 300 env JAX_PLATFORMS=cpu python3 -m benchmarks.bench_protocol --row=synthetic
