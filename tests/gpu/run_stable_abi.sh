#!/usr/bin/env bash
# Runs the torch fixture's tests against stable-ABI wheels of it, beside the torch that
# $PYTHON has (issue 53: a wheel built against torch 2.14.1 with TORCH_TARGET_VERSION 2.10,
# and one built against the oldest torch it admits, 2.11.0, each beside torch 2.11.0+cu130).
#
#   tests/gpu/run_stable_abi.sh WHEEL [WHEEL...]
#
# For each wheel: what it requires and the torch it loads beside, then
# tests/gpu/test_fixture_torch_ops.py (the wheel unpacked onto sys.path through
# K3_TORCH_OPS_WHEEL, nothing installed) and the fixture's own tests
# (tests/fixtures/torch_ops/tests). Both run from a copy in a temporary directory with no
# pytest configuration of the repository's (no xdist, no timeout plugin needed). Needs
# python3 (or $PYTHON) with torch, pytest and packaging, and a GPU. Exit 1 if any wheel's
# tests fail; every wheel is run.
set -euo pipefail

[ $# -gt 0 ] || { echo "usage: run_stable_abi.sh WHEEL [WHEEL...]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" - <<'EOF'
import torch
device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA GPU"
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) on {device}")
EOF

status=0
for wheel in "$@"; do
    wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
    run="$work/$(basename "$wheel" .whl)"
    mkdir -p "$run/site"
    "$python" -m zipfile -e "$wheel" "$run/site"
    cp "$root/tests/gpu/test_fixture_torch_ops.py" "$root/tests/fixtures/torch_ops/tests/test_ops.py" "$run/"
    echo
    echo "=== $wheel"
    grep -h '^Requires-Dist: torch' "$run"/site/*.dist-info/METADATA || true
    (cd "$run" && K3_TORCH_OPS_WHEEL="$wheel" "$python" -m pytest -c /dev/null \
        -p no:cacheprovider -s -v -W ignore::pytest.PytestUnknownMarkWarning \
        test_fixture_torch_ops.py) || status=1
    (cd "$run" && PYTHONPATH="$run/site${PYTHONPATH:+:$PYTHONPATH}" "$python" -m pytest \
        -c /dev/null -p no:cacheprovider -v test_ops.py) || status=1
done
exit $status
