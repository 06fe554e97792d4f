"""A real nightly build (slow): csrc's 12.9 x86_64 cell built with NVRTC and zig from a
commit, named and versioned by that commit (`0.1.0.devN+cu129`, N its committer time,
METADATA and filename alike), its manifest naming the commit, and the same bytes again from
empty device and wheel caches (`release build --compare`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.integration.nightly import RELEASE, REPO, git_commit_at

pytestmark = pytest.mark.slow

TIME = 1_733_212_345


def test_a_nightly_build_has_its_commits_version_and_the_same_bytes_again(
    tmp_path: Path, release_cache: Path
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copytree(REPO / "csrc", checkout / "csrc", ignore=shutil.ignore_patterns("build*"))
    shutil.copy2(REPO / "matrix.yaml", checkout / "matrix.yaml")
    commit = git_commit_at(checkout, TIME)
    cache = tmp_path / "cache"
    cache.mkdir()
    (release_cache / "toolchains").mkdir(parents=True, exist_ok=True)
    (cache / "toolchains").symlink_to(release_cache / "toolchains", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    cell = ("--cuda", "12.9", "--arch", "x86_64", "--cache-dir", str(cache))

    def release(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(RELEASE), *args], cwd=checkout, env=env, capture_output=True, text=True,
            check=False, timeout=1500,
        )  # fmt: skip

    built = release("build", "--channel", "nightly", *cell, "--json")
    assert built.returncode == 0, built.stderr[-3000:]
    document = json.loads(built.stdout)
    assert document["source_date_epoch"] == TIME
    (wheel,) = (checkout / "dist").glob("*.whl")
    assert wheel.name == f"k3_kernels-0.1.0.dev{TIME}+cu129-py3-none-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"k3_kernels-0.1.0.dev{TIME}+cu129.dist-info/METADATA")
    assert f"Version: 0.1.0.dev{TIME}+cu129".encode() in metadata
    manifest = json.loads((checkout / "dist" / "manifest.json").read_text())
    assert manifest["nightly"] == {"commit": commit.sha, "time": TIME}
    assert manifest["version"] == f"0.1.0.dev{TIME}"
    assert manifest["wheels"][0]["destination"]["kind"] == "s3"
    again = release(
        "build", "--channel", "nightly", *cell, "--compare", "dist/manifest.json", "--json"
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["identical"] is True
