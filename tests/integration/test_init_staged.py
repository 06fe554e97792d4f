"""`release init` on a copy of the fixture of DeepGEMM's shape (tests/fixtures/jit_gemm, a
git checkout of its own): the distribution published is the one build_sgl_k3_jit.sh stages
from sgl_k3_jit/, not the root setup.py's k3_jit; its IDE-only CMakeLists.txt is not the
build system; it compiles no .cu file and links NVRTC and ships CUDA headers (device-code:
none), its host library binds to no Python C-API (python: any), it links cudart and nvrtc,
imports tvm_ffi at build time, adds +<git sha> to its version unless K3_USE_LOCAL_VERSION=0,
and compiles as C++20 (the newest torch; as C++17, as DeepGEMM does, a torch older than
2.14). The matrix loads, and the dry run shows the prepare step; init changes none of the
project's files and provisions nothing. The torch versions come from a stand-in simple
index on 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.integration.indexes import serve
from tests.integration.test_init import FIXTURES, detected, dry_run, init, line_of, release, tree

GIT = shutil.which("git") or "git"
TORCH = [
    f"torch-{version}-cp{python}-cp{python}-manylinux_2_28_x86_64.whl"
    for version in ("2.11.0", "2.13.0", "2.14.0")
    for python in ("310", "311", "312")
]


class _Index(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path != "/simple/torch/":
            self.send_error(404)
            return
        files = [
            {"filename": n, "url": f"/files/{n}", "hashes": {"sha256": "0" * 64}} for n in TORCH
        ]
        body = json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": files})
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def index() -> Iterator[str]:
    with serve(_Index) as url:
        yield url + "simple/"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "k3-jit"
    shutil.copytree(FIXTURES / "jit_gemm", root)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "c"]):
        subprocess.run(
            [GIT, "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
            check=True, capture_output=True,
        )  # fmt: skip
    return root


def test_the_distribution_a_script_stages_is_released_as_it_is_shipped(
    checkout: Path, index: str
) -> None:
    before = tree(checkout)
    document = init(checkout.parent, checkout, "--torch-index", index)
    found = detected(document)
    setup = checkout / "setup.py"
    script = checkout / "build_sgl_k3_jit.sh"
    copies = line_of(script, "cp sgl_k3_jit/pyproject.toml")
    torch_line, named = line_of(setup, '"-ltorch",'), line_of(setup, 'name="k3_jit"')
    assert document["backend"] == "torch"
    assert found["backend"][1] == (
        f"setup.py:{torch_line}: links libtorch (-ltorch): its cells build "
        "beside an exact torch (CMakeLists.txt:1 is for an IDE only: NOTES: only for "
        "CMake-based IDEs (CLion, clangd) to index the sources, not for building:)"
    )
    assert found["project"] == (
        "sgl_k3_jit",
        f"build_sgl_k3_jit.sh:{copies}: copies sgl_k3_jit/pyproject.toml to stage it: "
        "sgl-k3-jit is the distribution published, not the root's k3_jit "
        f"(setup.py:{named})",
    )
    assert found["build.prepare"] == (
        "bash build_sgl_k3_jit.sh",
        f"build_sgl_k3_jit.sh:{copies}: build_sgl_k3_jit.sh stages build/, which the PEP 517 "
        "build then builds",
    )
    assert found["build.prepare.version-file"][0] == "sgl_k3_jit/VERSION"
    assert found["name"] == ("sgl-k3-jit", "sgl_k3_jit/pyproject.toml:6")
    assert found["version"] == ("0.1.0", "sgl_k3_jit/VERSION:1")
    assert found["device-code"] == (
        "none",
        f"setup.py:{line_of(setup, 'cpp_files=')}: its extension compiles csrc/jit_api.cpp, no "
        f".cu file, and links NVRTC (setup.py:{line_of(setup, '-lnvrtc')}: -lnvrtc) and ships "
        f"CUDA headers as package data (setup.py:{line_of(setup, 'package_data=')}: "
        "k3_jit/include/k3_jit/**/*): it compiles its kernels at run time",
    )
    assert found["python"][0] == "any"
    assert found["python"][1].startswith("csrc/jit_api.cpp: no Python C-API")
    # setup.py's libraries, not those of the CMakeLists.txt an IDE alone reads (cublasLt)
    assert found["build.cuda-libraries"][0] == "cudart nvrtc"
    assert found["build.requires"] == (
        "apache-tvm-ffi==0.1.9",
        f"setup.py:{line_of(setup, 'import tvm_ffi')}: the build imports tvm_ffi, which "
        f"apache-tvm-ffi==0.1.9 (setup.py:{line_of(setup, 'install_requires=')}) provides as a "
        "dependency and no build requirement names",
    )
    label = line_of(setup, 'revision = "+"')
    assert found["build.env"] == (
        "K3_USE_LOCAL_VERSION=0",
        f"setup.py:{line_of(setup, 'K3_USE_LOCAL_VERSION =')}: K3_USE_LOCAL_VERSION defaults to "
        "1, and get_package_version() then adds a local label "
        f"(setup.py:{label}) to the version: a release's version "
        "has none",
    )
    assert found["torch"] == (
        "2.14.0",  # the project compiles as C++20, which ATen of torch 2.14 needs
        f"the newest torch on {index} that no build requirement allows",
    )
    assert "sms" not in found
    assert "abi3" not in found
    assert document["changes"] == []
    assert document["undecided"] == []

    text = (checkout / "matrix.yaml").read_text()
    for line in (
        "project: sgl_k3_jit\n",
        "  prepare:\n    command: bash build_sgl_k3_jit.sh\n",
        "    version-file: sgl_k3_jit/VERSION\n    output: build\n",
        '  requires: ["apache-tvm-ffi==0.1.9"]\n',
        "  cuda-libraries: [cudart, nvrtc]\n",
        '    K3_USE_LOCAL_VERSION: "0"\n',
        "  device-code: none\n",
        "  python: any\n",
        '    torch: "2.14.0"\n',
    ):
        assert line in text
    assert "\n  sms:" not in text
    assert "\n  ptx:" not in text
    # no device code: neither CUDA version's cell asks for nvcc, nor 12.9's for a toolkit image
    assert "nvcc 13.0 comes from PyPI" not in text
    assert "toolkit-image" not in text
    assert "-cu12 wheels (no 12.9 toolkit or nvcc is needed)" in " ".join(
        line.strip().removeprefix("# ") for line in text.splitlines()
    )

    (cell,) = dry_run(checkout.parent, checkout)["cells"]
    assert cell["cell"] == "13.0-x86_64-torch2.14.0"
    assert cell["wheel"] == "sgl_k3_jit-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
    assert cell["prepare"].startswith(f"runs `bash build_sgl_k3_jit.sh` in {checkout} ")
    assert cell["command"][-1] == str(checkout / "build")
    assert cell["inputs"]["K3_USE_LOCAL_VERSION"] == "0"
    assert not (checkout.parent / "cache").exists()  # neither init nor the dry run provisioned
    after = tree(checkout)
    assert {k: v for k, v in after.items() if k in before} == before
    assert sorted(set(after) - set(before)) == [".github/workflows/release.yml", "matrix.yaml"]


def test_the_report_says_each_value_and_where_it_was_read(checkout: Path, index: str) -> None:
    done = release(checkout.parent, "init", str(checkout), "--torch-index", index)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for key, value in (
        ("project", "sgl_k3_jit"),
        ("build.prepare", "bash build_sgl_k3_jit.sh"),
        ("device-code", "none"),
        ("python", "any"),
        ("build.cuda-libraries", "cudart nvrtc"),
        ("build.env", "K3_USE_LOCAL_VERSION=0"),
        ("torch", "2.14.0"),
    ):
        at = lines.index(f"key:   {key}")
        assert lines[at + 1] == f"value: {value}"
        assert lines[at + 2].startswith("from:  ")


def test_a_project_that_compiles_as_cxx17_gets_a_torch_older_than_2_14(
    checkout: Path, index: str
) -> None:
    setup = checkout / "setup.py"
    setup.write_text(setup.read_text().replace('"-std=c++20"', '"-std=c++17"'))
    found = detected(init(checkout.parent, checkout, "--torch-index", index))
    assert found["torch"] == (
        "2.13.0",  # not 2.14.0: ATen of torch 2.14 needs C++20
        f"the newest torch on {index} that no build requirement and the project's C++17 "
        f"(setup.py:{line_of(setup, '-std=c++17')}: -std=c++17; torch 2.14 and later need "
        "C++20) allows",
    )
    assert '    torch: "2.13.0"\n' in (checkout / "matrix.yaml").read_text()


def test_init_in_the_subdirectory_says_where_to_run_it(checkout: Path) -> None:
    done = release(checkout.parent, "init", str(checkout / "sgl_k3_jit"), "--offline")
    assert done.returncode == 2
    copies = line_of(checkout / "build_sgl_k3_jit.sh", "cp sgl_k3_jit/pyproject.toml")
    assert done.stderr.splitlines() == [
        f"error: {checkout / 'sgl_k3_jit'}: sgl-k3-jit is the distribution build_sgl_k3_jit.sh "
        f"stages from this directory (build_sgl_k3_jit.sh:{copies}), with the rest of {checkout}",
        f"hint: run release init {checkout}: it writes project: sgl_k3_jit and build.prepare "
        "for build_sgl_k3_jit.sh",
    ]
    assert not (checkout / "sgl_k3_jit" / "matrix.yaml").exists()


def test_a_script_that_builds_and_installs_on_its_own_is_told_how_to_stop_under_release(
    checkout: Path,
) -> None:
    script = checkout / "build_sgl_k3_jit.sh"
    text = script.read_text().replace(
        'if [[ -n "${RELEASE_PREPARE:-}" ]]; then\n    exit 0\nfi\n',
        '"$PYTHON_EXE" -m pip install --quiet --upgrade build\n',
    )
    script.write_text(text)
    document = init(checkout.parent, checkout, "--offline")
    installs = line_of(script, "pip install")
    (note,) = [n for n in document["undecided"] if "builds a wheel of its own" in n["text"]]
    assert note["place"] == (
        f"build_sgl_k3_jit.sh:{installs} and build_sgl_k3_jit.sh:{line_of(script, '-m build')}"
    )
    assert note["fix"] == (
        "end build_sgl_k3_jit.sh after staging when RELEASE_PREPARE is set, e.g. "
        f'`[[ -n "${{RELEASE_PREPARE:-}}" ]] && exit 0` before line {installs}'
    )


def test_a_header_that_binds_to_python_is_a_change_before_one_wheel_serves_every_python(
    checkout: Path, index: str
) -> None:
    # sgl-project's DeepGEMM (dev, 2176dff): csrc/apis/mega.hpp reaches two headers that
    # include torch/python.h, whose inline functions name the interpreter's symbols
    (checkout / "csrc" / "apis").mkdir()
    (checkout / "csrc" / "apis" / "moe.hpp").write_text('#pragma once\n#include "moe_impl.hpp"\n')
    (checkout / "csrc" / "apis" / "moe_impl.hpp").write_text(
        "#pragma once\n\n#include <torch/python.h>\n"
    )
    unit = checkout / "csrc" / "jit_api.cpp"
    text = unit.read_text()
    unit.write_text(
        text.replace("#include <nvrtc.h>\n", '#include <nvrtc.h>\n#include "apis/moe.hpp"\n', 1)
    )
    document = init(checkout.parent, checkout, "--torch-index", index)
    (change,) = document["changes"]
    assert change["place"] == "csrc/apis/moe_impl.hpp:3"
    assert change["text"] == (
        "includes torch/python.h, reached from csrc/jit_api.cpp through csrc/apis/moe.hpp: it "
        "brings the Python C-API into the library, which a py3-none wheel (python: any) may "
        "not use, and the build's inspection refuses the wheel"
    )
    assert change["fix"].endswith(
        'build one wheel per Python instead (python: ["3.X", ...] in matrix.yaml)'
    )
    python = detected(document)["python"]
    assert python[0] == "any"
    assert python[1].endswith(
        "one py3-none wheel a cell, built with one CPython, once the headers they include "
        "bind to none either (needs a change)"
    )
