#!/usr/bin/env bash
# For kernel development only: not part of the release build (that is the PEP 517
# backend, see BUILDING.md). Builds the three k3-kernels wheels the GPU tests run
# against, with whatever toolchains this machine has:
#
#   OUT/nvcc13/*.whl     cubins for RELEASE_SMS + PTX of the highest, system nvcc (CUDA 13)
#   OUT/nvrtc129/*.whl   the same with NVRTC 12.9 + nvFatbin (only when NVRTC_DIR is set:
#                        a directory with nvidia/cuda_nvrtc, nvidia/nvfatbin, nvidia/cuda_runtime)
#   OUT/ptx75/*.whl      PTX for compute_75 only, system nvcc: the driver JIT-compiles it
#   OUT/sm80/*.whl       an sm_80 cubin only: no code for an SM90 GPU (csrc/tests/gpu/test_unsupported.py)
#
# usage: csrc/tools/dev_build.sh OUT [NVRTC_DIR]
set -euo pipefail

out=${1:?usage: dev_build.sh OUT [NVRTC_DIR]}
nvrtc_dir=${2:-}
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
sms=${RELEASE_SMS:-75;80;86;89;90;100}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cache=${RELEASE_DEVICE_CACHE:-${TMPDIR:-/tmp}/k3-dev-device-cache}

wheel() {  # name, then VAR=value settings for the backend
    local name=$1
    shift
    rm -rf "${out:?}/$name"
    env "$@" RELEASE_DEVICE_CACHE="$cache" RELEASE_DEVICE_LOG="$out/device-log.jsonl" \
        "$python" -m pip wheel --no-deps --no-build-isolation -q "$here" -w "$out/$name"
    echo "built $(ls "$out/$name"/*.whl)"
}

wheel nvcc13 RELEASE_DEVICE_COMPILER=nvcc RELEASE_SMS="$sms"
wheel ptx75 RELEASE_DEVICE_COMPILER=nvcc RELEASE_SMS= RELEASE_PTX=75
wheel sm80 RELEASE_DEVICE_COMPILER=nvcc RELEASE_SMS=80 RELEASE_PTX=
if [ -n "$nvrtc_dir" ]; then
    wheel nvrtc129 RELEASE_DEVICE_COMPILER=nvrtc RELEASE_CUDA_VERSION=12.9 \
        RELEASE_SMS="$sms" RELEASE_LOCAL_LABEL=cu129 \
        RELEASE_NVRTC_LIB="$(ls "$nvrtc_dir"/nvidia/cuda_nvrtc/lib/libnvrtc.so.12)" \
        RELEASE_NVFATBIN_LIB="$(ls "$nvrtc_dir"/nvidia/nvfatbin/lib/libnvfatbin.so.12)" \
        RELEASE_CUDA_INCLUDE="$nvrtc_dir/nvidia/cuda_runtime/include"
fi
