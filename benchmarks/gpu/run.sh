#!/usr/bin/env bash
# Builds Habitat on a GPU machine, runs the test suite (GPU-only tests included) and the GPU
# benchmark. Usage (from the repository root):
#
#   bash benchmarks/gpu/run.sh [all|build|test|bench] [model ...]
#
# Stages are idempotent, so a 10-minute command limit can be met one stage per call:
#   build: pip install --no-build-isolation . (CUPTI + NVTX compiled in when found)
#   check: what the stages import is there (restores the built extension into python/habitat/
#          from the installed package when the tree was sent again); every stage does this first
#   test:  pytest tests/python (the GPU tests run here), log + junit XML
#   bench: benchmarks/gpu/run_gpu_benchmark.py for the given models (default: all four)
#   overhead: issue 13's overhead table (benchmarks/overhead/gpu_table.py) for the given
#          models (default: resnet50 gpt2_small dcgan), fp32 and bf16; ~1 min per model
#   first-step: benchmarks/timeline/first_step.py (issue 31: the first detailed steps' step as
#          seen vs untraced bursts) for the given workloads (default: all), into $OUT/first-step/
#   kernels: benchmarks/gpu/collect_kernels.py for the given families (default: all), into
#          $OUT/kernels/<GPU>-<date>/; KERNEL_BUDGET_S seconds (default 480)
#   real-models: benchmarks/gpu/real_model_kernels.py for the given models (default: all
#          eight), into $OUT/real-models-gpu/<gpu>/; a few minutes
# Everything is written under $OUT (default: benchmarks/results): logs/ and <gpu>/.
set -uo pipefail

cd "$(dirname "$0")/../.."
STAGE=${1:-all}
shift || true
OUT=${OUT:-$PWD/benchmarks/results}
LOGS="$OUT/logs"
mkdir -p "$LOGS"
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
PY=${PYTHON:-python}

log() { echo "[run.sh $(date +%H:%M:%S)] $*"; }

installed() {
  # The installed extension, imported from outside the tree so python/habitat is not used.
  (cd /tmp && "$PY" -c "import habitat._C, habitat._engine" 2>/dev/null)
}

# The stages import habitat from python/ (PYTHONPATH=python), which needs the built modules
# (habitat._C, the capture; habitat._engine, the engine) beside its sources. build copies them
# there, but the device machine's working tree is sent again between calls, which removes them
# (2026-11-26: "cannot import name '_engine' from partially initialized module 'habitat'"):
# copy the installed ones back, building first if nothing is installed.
restore_tree_modules() {
  local so
  for so in $(cd /tmp && "$PY" -c "import habitat._C as c, habitat._engine as e; print(c.__file__, e.__file__)"); do
    cp -f "$so" python/habitat/ || return 1
  done
}

# Checks that a stage's imports work as the stage runs them (from the repository root, with
# PYTHONPATH=python and benchmarks/gpu importable), restoring the tree's built modules first
# when they are missing. Prints what is missing and returns 1 otherwise.
check_imports() {  # module ...
  local code="import importlib, sys; sys.path.insert(0, 'benchmarks/gpu')
missing = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as exc:
        missing.append(f'{name}: {type(exc).__name__}: {exc}')
print('\n'.join(missing)); sys.exit(1 if missing else 0)"
  if ! PYTHONPATH=python "$PY" -c "import habitat._C, habitat._engine" >/dev/null 2>&1; then
    installed || build || return 1
    log "restoring the built extension into python/habitat/ (the tree was refreshed)"
    restore_tree_modules || { log "could not copy the installed extension into python/habitat/"; return 1; }
  fi
  local out
  if ! out=$(PYTHONPATH=python "$PY" -c "$code" habitat._C habitat._engine "$@" 2>&1); then
    log "missing imports for this stage:"
    echo "$out" | tail -n 20
    return 1
  fi
}

build() {
  log "environment"
  { nvidia-smi; "$PY" -c "import torch, sys; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"; nvcc --version; } \
    > "$LOGS/environment.txt" 2>&1
  tail -n 4 "$LOGS/environment.txt"
  log "pip install --no-build-isolation --no-deps . (MAX_JOBS=$MAX_JOBS)"
  local t0=$SECONDS
  if ! "$PY" -m pip install --no-build-isolation --no-deps -v . > "$LOGS/build.log" 2>&1; then
    grep -E "error|Error" "$LOGS/build.log" | head -n 40
    log "build FAILED after $((SECONDS - t0)) s (see $LOGS/build.log)"
    return 1
  fi
  log "built in $((SECONDS - t0)) s; CUPTI: $(grep -E -o "habitat: CUPTI[^(]*" "$LOGS/build.log" | head -n 1)"
  # Tests import habitat from python/ (like on the CPU machine): put the built modules there too.
  restore_tree_modules
  (cd /tmp && "$PY" -c "import habitat, habitat.capture.cupti as c; print('cupti_available:', c.cupti_available(), '| status:', c.cupti_status())") \
    | tee "$LOGS/cupti_status.txt"
}

run_tests() {
  check_imports torch pytest habitat.capture.cupti || return 1
  log "pytest tests/python"
  local t0=$SECONDS
  PYTHONPATH=python timeout 540 "$PY" -m pytest tests/python -q -rs -p no:cacheprovider \
    --junitxml="$LOGS/pytest.xml" > "$LOGS/pytest.log" 2>&1
  local rc=$?
  tail -n 30 "$LOGS/pytest.log"
  log "pytest exit $rc in $((SECONDS - t0)) s"
  return $rc
}

# One benchmark script over the models given (its own default set when none), logged.
run_script() {  # name time-limit script out-dir [models...]
  local name=$1 limit=$2 script=$3 dest=$4
  shift 4
  check_imports torch models habitat.capture.cupti habitat.capture.predict habitat.data.engine || return 1
  log "$name: ${*:-default models}"
  local args=()
  [ $# -gt 0 ] && args=(--models "$@")
  local t0=$SECONDS
  PYTHONPATH=python timeout "$limit" "$PY" "$script" --out "$dest" "${args[@]}" \
    2>&1 | tee "$LOGS/$name${1:+_$1}.log"
  local rc=${PIPESTATUS[0]}
  log "$name exit $rc in $((SECONDS - t0)) s"
  return $rc
}

bench() { run_script bench 1500 benchmarks/gpu/run_gpu_benchmark.py "$OUT" "$@"; }
real_models() { run_script real_models 570 benchmarks/gpu/real_model_kernels.py "$OUT/real-models-gpu" "$@"; }

kernels() {
  check_imports torch habitat.capture.cupti || return 1
  local gpu families=${*:-}
  gpu=$(cd /tmp && "$PY" -c "import habitat.capture.cupti as c; print(c.origin_device())") || return 1
  local dest="$OUT/kernels/$gpu-$(date -u +%Y-%m-%d)"
  log "kernels: ${families:-all families} -> $dest"
  local args=(--out "$dest" --budget-s "${KERNEL_BUDGET_S:-480}")
  [ -n "$families" ] && args+=(--families "$(echo "$families" | tr ' ' ',')")
  local t0=$SECONDS
  PYTHONPATH=python timeout 590 "$PY" benchmarks/gpu/collect_kernels.py "${args[@]}" 2>&1 \
    | grep -v "ActivityProfilerHandler" | tee "$LOGS/kernels_$(date -u +%H%M%S).log"
  local rc=${PIPESTATUS[0]}
  log "kernels exit $rc in $((SECONDS - t0)) s"
  return $rc
}

# Issue 31: the first detailed steps' step as seen against untraced bursts (ResNet-50 with
# AdamW fp32/bf16, BERT-like bf16, T5-like fp32), into $OUT/first-step/.
first_step() {
  check_imports torch models habitat.capture.cupti habitat.data.engine || return 1
  log "first-step: ${*:-all workloads}"
  # CUPTI's API records of every call (the default): launch-only records lost kernels on an
  # H100 (benchmarks/results/first-step-H100-SXM5-80GB-2026-11-27/README.md); FIRST_STEP_RECORDS=both
  # measures both again.
  local args=(--out "$OUT/first-step" --cupti-api-records "${FIRST_STEP_RECORDS:-all}")
  [ $# -gt 0 ] && args+=(--workloads "$@")
  local t0=$SECONDS
  PYTHONPATH=python timeout 570 "$PY" benchmarks/timeline/first_step.py "${args[@]}" 2>&1 \
    | tee "$LOGS/first_step.log"
  local rc=${PIPESTATUS[0]}
  log "first-step exit $rc in $((SECONDS - t0)) s"
  return $rc
}

overhead() {
  run_script overhead 570 benchmarks/overhead/gpu_table.py "$OUT/overhead" "$@"
  local rc=$?
  log "overhead table: $OUT/overhead/gpu-overhead.md"
  return $rc
}

case "$STAGE" in
  build) build ;;
  check) check_imports torch pytest models habitat.capture.cupti habitat.capture.predict habitat.data.engine ;;
  test) run_tests ;;
  bench) bench "$@" ;;
  overhead) overhead "$@" ;;
  kernels) kernels "$@" ;;
  real-models) real_models "$@" ;;
  first-step) first_step "$@" ;;
  all)
    build || exit 1
    run_tests
    test_rc=$?
    bench "$@"
    bench_rc=$?
    exit $((test_rc != 0 || bench_rc != 0))
    ;;
  *) echo "usage: $0 [all|build|check|test|bench|overhead|kernels|real-models|first-step] [model or family ...]" >&2; exit 2 ;;
esac
