"""The full tier's part of tests/integration/test_cibuildwheel.py (its docstring says what both
parts check).

The `[tool.cibuildwheel]` configuration of csrc/, checked with cibuildwheel itself.

There is no container engine here, so the container build cannot run. What can run does:
cibuildwheel's own identifier selection (one build per platform, not one per Python), its
own evaluation of the `environment` table against a file `release env` wrote (the build
sees exactly the inputs `release build` would give it), and the real CLI parser on the
`release` commands the configuration runs in the container.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_cibuildwheel import ROOT, evaluate

pytestmark = pytest.mark.slow


def test_release_env_provisions_and_cibuildwheel_reads_it(
    tmp_path: Path, release_cache: Path
) -> None:
    """The real `release env` (toolchain from PyPI) and the environment cibuildwheel makes."""
    env_file = tmp_path / "release-build.env"
    common = ["--cuda", "13.0", "--arch", "x86_64", "--cache-dir", str(release_cache)]
    release = [str(Path(sys.executable).with_name("release"))]
    run_env = dict(os.environ)
    written = subprocess.run(
        [*release, "env", *common, "--out", str(env_file)],
        cwd=ROOT, env=run_env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    printed = subprocess.run(
        [*release, "env", *common],
        cwd=ROOT, env=run_env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    exported = dict(
        shlex.split(line.removeprefix("export "))[0].split("=", 1)
        for line in printed.stdout.splitlines()
    )
    got = evaluate(env_file)
    assert {k: got[k] for k in exported} == exported
    assert all(not v for k, v in got.items() if k not in exported)
    assert got["RELEASE_DEVICE_COMPILER"] == "nvcc"
    assert got["RELEASE_CUDA_VERSION"] == "13.0"
    assert got["RELEASE_SMS"] == "75;80;86;89;90;100"
    assert Path(got["RELEASE_CUDA_HOME"], "bin", "nvcc").is_file()
