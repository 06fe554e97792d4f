#!/usr/bin/env bash
# Runs sgl-project/DeepGEMM's own tests against an sgl-deep-gemm wheel that `release build`
# made (docs/testing.md: sgl-project/DeepGEMM `dev` through `release init` and the edits it
# asks for, `release build --cuda 13.0` with the GPU machine's torch pinned), beside the
# torch that $PYTHON has, from a copy of the tests and no source tree on the path, so that
# the kernels JIT-compile from the headers the wheel ships.
#
#   tests/gpu/run_deepgemm.sh WHEEL TVM_FFI_WHEEL TESTS_DIR [TEST:SECONDS ...]
#
# TVM_FFI_WHEEL is apache-tvm-ffi 0.1.9's wheel for that Python (its runtime dependency,
# carried where the machine has no index); TESTS_DIR is DeepGEMM's sgl_deep_gemm/tests.
# Each test runs on its own, bounded by its seconds (the first run of test_bf16.py compiles
# its kernels for minutes). Exit 1 if any test fails or runs out of time.
set -uo pipefail

[ $# -ge 3 ] || { echo "usage: run_deepgemm.sh WHEEL TVM_FFI_WHEEL TESTS_DIR [TEST:SECONDS ...]" >&2; exit 2; }
wheel=$1 tvm_ffi=$2 tests=$3
shift 3
[ $# -gt 0 ] || set -- test_layout.py:60 test_hyperconnection.py:90 test_lazy_init.py:60 \
    test_einsum.py:120 test_bf16.py:240  # 570 s: one 10-minute device command
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m pip install -q --no-deps --target "$work/site" "$tvm_ffi" || exit 2
"$python" -m pip install -q --no-deps --target "$work/sgl" "$wheel" || exit 2
cp -r "$tests" "$work/tests"
cd "$work/tests" || exit 2
export PYTHONPATH="$work/sgl:$work/site"
"$python" - <<'PY'
import os, torch, deep_gemm
device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA GPU"
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) on {device}")
print(f"deep_gemm from {os.path.dirname(deep_gemm.__file__)}")
PY
status=0
for spec in "$@"; do
    test=${spec%%:*} limit=${spec##*:} start=$(date +%s)
    timeout "$limit" "$python" "$test" > "$work/$test.log" 2>&1
    code=$?
    echo "=== $test: exit $code in $(( $(date +%s) - start )) s"
    tail -n 4 "$work/$test.log"
    [ "$code" -eq 0 ] || status=1
done
exit "$status"
