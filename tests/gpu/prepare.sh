#!/usr/bin/env bash
# Builds, on this machine, every wheel the GPU tests take (docs/testing.md), into .gpu/:
#
#   bash tests/gpu/prepare.sh [DEEPGEMM]
#
# .gpu/csrc: k3-kernels for CUDA 13.0, x86_64 (matrix.yaml); .gpu/stable-2.14.1 and
# .gpu/stable-2.11.0: the torch fixture's stable flavour against torch 2.14.1 and against the
# oldest torch it admits (issue 53's pair); .gpu/jg: the jit_gemm fixture against torch
# 2.11.0, the GPU machine's; .gpu/host: the jit_host fixture (its _driver linked against
# the driver's link stub); .gpu/dg: apache-tvm-ffi 0.1.9 for the GPU machine's Python
# (3.12) and, given DEEPGEMM (a checkout of sgl-project/DeepGEMM `dev` with its submodules,
# released with `release init` and the edits it asks for, its matrix.yaml's torch set to
# 2.11.0), sgl-deep-gemm and a copy of its tests. Then, on the GPU machine (the device tool
# carries .gpu): bash tests/gpu/run_all.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
release="$root/.venv/bin/release"
out="$root/.gpu"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cd "$root"

"$release" build --cuda 13.0 --arch x86_64 --out "$out/csrc"
"$release" build --matrix tests/gpu/stable-abi-newer.yaml --out "$out/stable-2.14.1"
"$release" build --matrix tests/gpu/stable-abi-oldest.yaml --out "$out/stable-2.11.0"

# the fixture's prepare step stages build/ in its checkout: a copy, committed (the build's
# SOURCE_DATE_EPOCH is its last commit's time)
cp -r tests/fixtures/jit_gemm "$work/jit_gemm"
cp tests/gpu/jit-gemm-2.11.yaml "$work/jit_gemm/matrix.yaml"
(
    cd "$work/jit_gemm"
    git init -q && git add -A
    git -c user.name=gpu -c user.email=gpu@localhost commit -qm fixture --date=@315532800
    "$release" build --cuda 13.0 --arch x86_64 --out "$out/jg"
)

# tests/fixtures/jit_host for CUDA 12.9: its _driver links the CUDA_HOME's stub of libcuda
cp -r tests/fixtures/jit_host "$work/jit_host"
(
    cd "$work/jit_host"
    git init -q && git add -A
    git -c user.name=gpu -c user.email=gpu@localhost commit -qm fixture --date=@315532800
    "$release" build --cuda 12.9 --arch x86_64 --out "$out/host"
)

"$root/.venv/bin/pip" download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 apache-tvm-ffi==0.1.9 -d "$out/dg"
if [ $# -gt 0 ]; then
    (cd "$1" && "$release" build --cuda 13.0 --arch x86_64 --out "$out/dg")
    rm -rf "$out/dg/tests"
    cp -r "$1/sgl_deep_gemm/tests" "$out/dg/tests"
fi
ls -l "$out"/*/*.whl
