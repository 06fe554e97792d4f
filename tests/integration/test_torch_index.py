"""A CUDA 12.9 torch cell of a JIT-first project (device-code: none: no nvcc, which PyPI
lacks for 12.9) takes its torch from the matrix's torch-index: PyTorch's cu129 index is
unreachable here, so a stand-in simple index on 127.0.0.1 serves its page. The dry run and
`release plan` name that torch from that index and say the cell builds here, without nvcc
(the plan asks the stand-in for the GitHub release too, and gets no answer); provisioning
the cell's environment asks that index for exactly that torch, for the cell's Python, and
stops at the download (the stand-in has no file to give), naming the index."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from release.errors import ToolchainError
from release.matrix import load_matrix
from release.toolchain.buildenv import environment_of, provision_environment
from tests.integration.indexes import QuietHandler, serve

RELEASE = Path(sys.executable).with_name("release")
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
TAG = f"cp{PYTHON.replace('.', '')}"
WHEELS = [
    f"torch-2.10.0+cu129-{TAG}-{TAG}-manylinux_2_28_x86_64.whl",
    f"torch-2.11.0+cu129-{TAG}-{TAG}-manylinux_2_28_x86_64.whl",
    f"torch-2.11.0+cu129-{TAG}-{TAG}-manylinux_2_28_aarch64.whl",
    "torch-2.11.0+cu129-cp39-cp39-manylinux_2_28_x86_64.whl",
]


class _Index(QuietHandler):
    """PyTorch's cu129 index as pip sees it: one project, torch; no file behind a link.
    It records every path asked for."""

    requests: list[str] = []  # noqa: RUF012 (one list shared by the server's handlers)

    def do_GET(self) -> None:
        type(self).requests.append(unquote(self.path))
        if self.path != "/simple/torch/":
            self.send_error(404)
            return
        links = "".join(
            f'<a href="/files/{name}#sha256={"0" * 64}">{name}</a>\n' for name in WHEELS
        )
        self.send_body(
            f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode(), "text/html"
        )


@pytest.fixture(scope="module")
def index() -> Iterator[str]:
    with serve(_Index) as url:
        yield url + "simple/"


MATRIX = """\
project: project
build:
  backend: torch
  requires: ["apache-tvm-ffi==0.1.9"]
  cuda-libraries: [nvrtc, cublas, cublasLt]
defaults:
  arches: [x86_64]
  manylinux: "2_28"
  device-code: none
  python: any
cuda:
  "12.9":
    destination: github
    local-label: cu129
    torch: "2.11.0"
    torch-index: {index}
destinations:
  github: {{kind: github, repository: k3-project/jit-kernels, api-url: "{api}"}}
"""


@pytest.fixture
def matrix(tmp_path: Path, index: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77", "torch"]\n'
        'build-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "jit-kernels"\nversion = "0.1.0"\n',
        encoding="utf-8",
    )
    path = tmp_path / "matrix.yaml"
    api = index.removesuffix("/simple/")  # answers 404 to every GitHub request
    path.write_text(MATRIX.format(index=index, api=api), encoding="utf-8")
    return path


def clean_environment(tmp_path: Path) -> dict[str, str]:
    """This machine's PATH (its CPythons) and nothing of its pip configuration: the
    machine's own index and torch cap never answer instead of the stand-in."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


@pytest.mark.skipif(shutil.which(f"python{PYTHON}") is None, reason=f"no python{PYTHON}")
def test_the_dry_run_names_the_torch_from_the_index_and_builds_here_without_nvcc(
    matrix: Path, index: str, tmp_path: Path
) -> None:
    env = {**clean_environment(tmp_path), "RELEASE_CACHE_DIR": str(tmp_path / "cache")}
    _Index.requests.clear()
    done = subprocess.run(
        [str(RELEASE), "build", "--dry-run", "--json", "--matrix", str(matrix)],
        capture_output=True, text=True, check=False, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (cell,) = json.loads(done.stdout)["cells"]
    assert cell["cell"] == "12.9-x86_64-torch2.11.0"
    assert cell["torch"].startswith(f"torch 2.11.0 for Python {PYTHON}, from {index}, in ")
    assert cell["builds"] == "here"
    assert cell["device_compiler"].startswith("none (no device code, no nvcc); CUDA_HOME with ")
    assert _Index.requests == [], "a dry run asks no index"
    assert not (tmp_path / "cache").exists(), "a dry run provisions nothing"


def test_the_plan_names_the_torch_from_the_index_and_no_nvcc(
    matrix: Path, index: str, tmp_path: Path
) -> None:
    env = {**clean_environment(tmp_path), "RELEASE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [str(RELEASE), "plan", "--json", "--matrix", str(matrix)],
        capture_output=True, text=True, check=False, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    (cell,) = json.loads(done.stdout)["cells"]
    assert cell["toolchain_ok"] is True
    none, home, torch = cell["toolchain"].split("; ")
    assert none == "none (no device code, no nvcc)"
    assert home.startswith("CUDA_HOME with nvrtc, cublas, cublasLt (PyPI ")
    assert "nvidia-cuda-nvrtc-cu12==12.9.86" in home
    assert torch.startswith(f"torch 2.11.0 for Python {PYTHON}, from {index}, in ")
    assert not (tmp_path / "cache").exists(), "a plan provisions nothing"


@pytest.mark.skipif(shutil.which(f"python{PYTHON}") is None, reason=f"no python{PYTHON}")
def test_provisioning_asks_the_index_for_exactly_the_cells_torch(
    matrix: Path, index: str, tmp_path: Path
) -> None:
    (cell,) = load_matrix(matrix).cells
    spec = environment_of(cell)
    assert spec is not None
    _Index.requests.clear()
    with pytest.raises(ToolchainError) as caught:
        provision_environment(
            spec,
            toolkit=tmp_path / "cuda-home",  # never reached: the torch download comes first
            cache_dir=tmp_path / "toolchains",
            python=sys.executable,
            env=clean_environment(tmp_path),
        )
    assert _Index.requests[0] == "/simple/torch/"
    assert f"/files/torch-2.11.0+cu129-{TAG}-{TAG}-manylinux_2_28_x86_64.whl" in _Index.requests
    assert set(_Index.requests) <= {"/simple/torch/", *(f"/files/{w}" for w in WHEELS)}
    assert "pip installing torch==2.11.0 failed" in caught.value.message
    assert caught.value.hint is not None
    assert f"check that {index} has torch 2.11.0 for Python {PYTHON} on x86_64" in (
        caught.value.hint
    )
