"""release.project.layout: what `release init` reads of a repository besides its build
files, on the fixture of DeepGEMM's shape (tests/fixtures/jit_gemm): the distribution its
script stages from sgl_k3_jit/, the native code setup.py and that script build, the CUDA
headers it ships, its local-version switch."""

from __future__ import annotations

import shutil
from pathlib import Path

from release.project import read_project_files
from release.project.layout import read_layout

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "jit_gemm"


def test_the_fixture_stages_sgl_k3_jit_and_builds_host_code_only() -> None:
    layout = read_layout(read_project_files(FIXTURE))
    staged = layout.staged
    assert staged is not None
    assert (staged.directory, staged.name.value, staged.script, staged.output) == (
        "sgl_k3_jit", "sgl-k3-jit", "build_sgl_k3_jit.sh", "build"
    )  # fmt: skip
    assert (staged.version_file, staged.installs, staged.builds) == (
        "sgl_k3_jit/VERSION",
        None,
        None,
    )
    assert layout.version is not None
    assert (layout.version.value, str(layout.version.place)) == ("0.1.0", "VERSION:1")
    assert [u for u, _ in layout.units] == ["csrc/jit_api.cpp"]
    assert [(str(h.place), h.value) for h in layout.cuda_headers] == [
        ("setup.py:98", "k3_jit/include/k3_jit/**/*"),
        ("sgl_k3_jit/pyproject.toml:23", "k3_jit/include/k3_jit/**/*"),
    ]
    assert layout.native.standard is not None
    assert layout.native.standard.value == "20"
    assert layout.local_version.switch is not None
    assert layout.local_version.switch.name == "K3_USE_LOCAL_VERSION"
    assert layout.local_version.label is None  # the switch turns it off
    assert layout.staged_above is None


def test_the_subdirectory_knows_the_script_above_that_stages_it(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    (root / ".git").mkdir()
    layout = read_layout(read_project_files(root / "sgl_k3_jit"))
    assert layout.staged is None
    above = layout.staged_above
    assert above is not None
    assert (above.directory, above.script, str(above.copies)) == (
        "sgl_k3_jit", "build_sgl_k3_jit.sh", "build_sgl_k3_jit.sh:30"
    )  # fmt: skip
