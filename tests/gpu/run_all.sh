#!/usr/bin/env bash
# Runs the GPU tests against the wheels tests/gpu/prepare.sh left in .gpu/ (docs/testing.md),
# on a machine with an NVIDIA GPU, python3 with torch 2.11.0+cu130, pytest and packaging:
#
#   bash tests/gpu/run_all.sh [PART...]     # parts: csrc stable jit driver deepgemm (default: all)
#
# csrc: csrc/tests/gpu against k3-kernels (sm_90 cubins expected); stable: issue 53's pair
# beside this torch; jit: the jit_gemm fixture's kernel, JIT-compiled by NVRTC; driver: a
# library linked against the driver's link stub, calling the real driver; deepgemm:
# sgl-deep-gemm's own tests, each bounded (together about nine minutes: a device command of
# its own). One line a part with its exit status; exit 1 if any part fails.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
gpu="$root/.gpu"
python=${PYTHON:-python3}
cd "$root" || exit 2
[ $# -gt 0 ] || set -- csrc stable jit driver deepgemm
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'

tvm_ffi=$(ls "$gpu"/dg/apache_tvm_ffi-0.1.9-*.whl 2>/dev/null | head -1)
status=0
for part in "$@"; do
    start=$(date +%s)
    case $part in
        csrc) bash csrc/tests/gpu/run_on_device.sh "$gpu"/csrc/k3_kernels-*.whl 900 ;;
        stable) bash tests/gpu/run_stable_abi.sh "$gpu"/stable-2.14.1/*.whl "$gpu"/stable-2.11.0/*.whl ;;
        jit)
            site=$(mktemp -d)
            "$python" -m pip install -q --no-deps --target "$site" "$tvm_ffi" &&
                PYTHONPATH="$site" K3_JIT_GEMM_WHEEL=$(ls "$gpu"/jg/sgl_k3_jit-*.whl) \
                    "$python" -m pytest -s -v -p no:cacheprovider tests/gpu/test_fixture_jit_gemm.py
            ;;
        driver)
            K3_DRIVER_WHEEL=$(ls "$gpu"/host/k3_jit_host-*.whl) \
                "$python" -m pytest -s -v -p no:cacheprovider tests/gpu/test_fixture_driver.py
            ;;
        deepgemm)
            bash tests/gpu/run_deepgemm.sh "$gpu"/dg/sgl_deep_gemm-*.whl "$tvm_ffi" "$gpu/dg/tests" \
                test_layout.py:45 test_hyperconnection.py:60 test_lazy_init.py:40 \
                test_einsum.py:100 test_bf16.py:230
            ;;
        *) echo "unknown part $part (csrc stable jit driver deepgemm)" >&2; exit 2 ;;
    esac
    code=$?
    echo "=== $part: exit $code in $(( $(date +%s) - start )) s"
    [ "$code" -eq 0 ] || status=1
done
exit "$status"
