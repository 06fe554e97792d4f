#!/usr/bin/env bash
# Runs the GPU tests against one k3-kernels build.
#
#   csrc/tests/gpu/run_on_device.sh WHEEL_OR_DIR [EXPECT_ARCH] [PYTEST_ARGS...]
#
# WHEEL_OR_DIR: a k3-kernels wheel (installed with pip --no-deps --target into a temp
# dir), or a directory that holds k3_kernels/ (put on PYTHONPATH as it is).
# EXPECT_ARCH: the __CUDA_ARCH__ the loaded code must report, e.g. 900 on an H200 for
# a build with sm_90 cubins, 750 for a PTX-only compute_75 build; empty = derive it from
# the build info. PYTEST_ARGS (paths from the repository root, where pytest runs) default to
# csrc/tests/gpu. Needs python3 with torch and pytest.
set -euo pipefail

target=${1:?usage: run_on_device.sh WHEEL_OR_DIR [EXPECT_ARCH] [PYTEST_ARGS...]}
expect=${2:-}
shift
[ $# -gt 0 ] && shift
root=$(cd "$(dirname "$0")/../../.." && pwd)
python=${PYTHON:-python3}

if [ -f "$target" ]; then
    site=$(mktemp -d)
    trap 'rm -rf "$site"' EXIT
    if ! "$python" -m pip install -q --no-deps --target "$site" "$target" 2>/dev/null; then
        "$python" -m zipfile -e "$target" "$site"  # a wheel is a zip; no pip needed
    fi
else
    site=$(cd "$target" && pwd)
fi

export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export K3_EXPECT_ARCH="$expect"
export K3_GPU_TESTS_REQUIRED=1
cd "$root"
"$python" -m k3_kernels info || true
[ $# -gt 0 ] || set -- csrc/tests/gpu
exec "$python" -m pytest -p no:cacheprovider -q "$@"
