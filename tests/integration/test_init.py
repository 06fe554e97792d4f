"""`release init` as a user runs it, on copies of the torch, cmake and csrc projects and of
the extension-template-shaped fixture: it writes matrix.yaml and the caller workflow,
changes none of the project's files, creates no cache, says what it detected and what needs
a change with file:line, refuses to overwrite without --force, and `release build
--dry-run` passes right after it. A torch project's torch comes from a stand-in simple index
on 127.0.0.1 (one request); an index out of reach, or --offline, leaves a TODO that the
loader refuses at its line.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version
from ruamel.yaml import YAML

from release.cli import main
from tests.integration.indexes import serve
from tests.integration.torchindex import CUDA12, CUDA13, metadata_of

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
RELEASE = Path(sys.executable).with_name("release")
GIT = shutil.which("git") or "git"

TORCH_WHEELS = [
    ("torch-2.9.1-cp310-cp310-manylinux_2_28_x86_64.whl", False),
    ("torch-2.10.0-cp310-cp310-manylinux_2_28_x86_64.whl", False),
    ("torch-2.11.0-cp310-cp310-manylinux_2_28_x86_64.whl", False),
    ("torch-2.11.0-cp313-cp313-manylinux_2_28_x86_64.whl", False),
    ("torch-2.12.0-cp310-cp310-manylinux_2_28_x86_64.whl", True),  # yanked
    ("torch-2.13.0rc1-cp310-cp310-manylinux_2_28_x86_64.whl", False),
]


def _metadata(name: str) -> bytes:
    """PyPI's METADATA of the torch release `name` is a wheel of (tests/integration/torchindex:
    up to 2.10 on CUDA 12.8, from 2.11 on CUDA 13)."""
    version = name.split("-")[1]
    return metadata_of(version, CUDA12 if Version(version) < Version("2.11") else CUDA13)


class _Index(BaseHTTPRequestHandler):
    """A PEP 691 simple index with one project, torch, and the PEP 658 metadata of its
    wheels; it counts the requests."""

    requests: list[str] = []  # noqa: RUF012 (one list shared by the server's handlers)

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        named = self.path.removeprefix("/files/").removesuffix(".metadata")
        if self.path.endswith(".metadata") and named in dict(TORCH_WHEELS):
            metadata = _metadata(named)
            self.send_response(200)
            self.send_header("Content-Length", str(len(metadata)))
            self.end_headers()
            self.wfile.write(metadata)
            return
        if self.path != "/simple/torch/":
            self.send_error(404)
            return
        files = [
            {"filename": name, "url": f"/files/{name}", "hashes": {"sha256": "0" * 64},
             "core-metadata": {"sha256": hashlib.sha256(_metadata(name)).hexdigest()},
             "yanked": yanked}
            for name, yanked in TORCH_WHEELS
        ]  # fmt: skip
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


def copy(source: Path, where: Path) -> Path:
    shutil.copytree(
        source, where, ignore=shutil.ignore_patterns("matrix.yaml", "build", "*.egg-info", "tests")
    )
    return where


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def release(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELEASE_", "PIP_"))}
    env["RELEASE_CACHE_DIR"] = str(cwd / "cache")
    return subprocess.run(
        [str(RELEASE), *args], capture_output=True, text=True, check=False, cwd=cwd, env=env,
        timeout=120,
    )  # fmt: skip


def init(cwd: Path, project: Path, *args: str) -> dict[str, Any]:
    done = release(cwd, "init", str(project), "--json", *args)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def dry_run(cwd: Path, project: Path) -> dict[str, Any]:
    done = release(cwd, "build", "--dry-run", "--json", "--matrix", str(project / "matrix.yaml"))
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def line_of(path: Path, text: str) -> int:
    """The number of the one line of `path` that holds `text` (outside a comment)."""
    (number,) = [
        n
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if text in line and not line.lstrip().startswith("#")
    ]
    return number


def detected(document: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {f["key"]: (f["value"], f["source"]) for f in document["detected"]}


def test_a_torch_project_gets_the_newest_torch_its_requirement_allows(
    tmp_path: Path, index: str
) -> None:
    project = copy(FIXTURES / "torch_ops", tmp_path / "ops")
    before = tree(project)
    _Index.requests.clear()
    document = init(tmp_path, project, "--torch-index", index)
    # two small requests, nothing downloaded: the page, and the METADATA of the torch it
    # pins, whose own requirements (setuptools<82) leave room for the build's (setuptools>=77)
    assert _Index.requests == [
        "/simple/torch/",
        "/files/torch-2.11.0-cp313-cp313-manylinux_2_28_x86_64.whl.metadata",
    ]
    found = detected(document)
    uses = line_of(project / "setup.py", "cpp_extension.CUDAExtension")
    assert found["backend"] == ("torch", f"setup.py:{uses}: uses torch's CUDAExtension")
    assert found["torch"] == (
        "2.11.0",  # not the yanked 2.12.0, not 2.13.0rc1
        f"the newest torch on {index} that torch>=2.10 (pyproject.toml:5) allows",
    )
    assert found["abi3"] == ("3.10", "pyproject.toml:12: requires-python >=3.10")
    assert found["build.env"][0] == "FORCE_CUDA=1"
    assert [w["path"] for w in document["written"]] == [
        str(project / "matrix.yaml"),
        str(project / ".github" / "workflows" / "release.yml"),
    ]
    text = (project / "matrix.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    assert '    torch: "2.11.0"\n' in text
    assert f"    torch-index: {index}\n" in text
    assert '    FORCE_CUDA: "1"\n' in text

    (cell,) = dry_run(tmp_path, project)["cells"]
    assert cell["wheel"] == "k3_torch_ops-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl"
    assert cell["inputs"]["FORCE_CUDA"] == "1"
    assert not (tmp_path / "cache").exists()  # neither init nor the dry run provisioned
    after = tree(project)
    assert {k: v for k, v in after.items() if k in before} == before  # the project's own files
    assert sorted(set(after) - set(before)) == [".github/workflows/release.yml", "matrix.yaml"]


def test_a_torch_whose_own_requirements_exclude_the_builds_is_passed_over(
    tmp_path: Path, index: str
) -> None:
    """SageAttention's setuptools<75 beside torch 2.13.0's setuptools>=77.0.3: pip refuses
    the pair, so init pins the newest torch whose requirements leave room (here torch
    2.11.0's setuptools<82 excludes a build's setuptools>=82)."""
    project = copy(FIXTURES / "torch_ops", tmp_path / "ops")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"setuptools>=77"', '"setuptools>=82"'))
    _Index.requests.clear()
    found = detected(init(tmp_path, project, "--torch-index", index))
    line = line_of(pyproject, "setuptools>=82")
    assert found["torch"] == (
        "2.10.0",
        f"the newest torch on {index} that torch>=2.10 (pyproject.toml:5) allows, and whose "
        "own requirements admit the build's (not 2.11.0: it requires setuptools<82, which "
        f"setuptools>=82 (pyproject.toml:{line}) excludes)",
    )
    assert _Index.requests == [
        "/simple/torch/",  # once, however many releases are asked about
        "/files/torch-2.11.0-cp313-cp313-manylinux_2_28_x86_64.whl.metadata",
        "/files/torch-2.10.0-cp310-cp310-manylinux_2_28_x86_64.whl.metadata",
    ]
    assert '    torch: "2.10.0"\n' in (project / "matrix.yaml").read_text()
    # a requirement for another platform is none a Linux build installs: it excludes nothing
    windows = copy(FIXTURES / "torch_ops", tmp_path / "windows")
    pyproject = windows / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            '"setuptools>=77"', '"setuptools>=77", "setuptools>=82; sys_platform == \'win32\'"'
        )
    )
    assert detected(init(tmp_path, windows, "--torch-index", index))["torch"][0] == "2.11.0"


def test_flags_made_from_a_variable_of_the_projects_get_the_cells_sms_through_it(
    tmp_path: Path, index: str
) -> None:  # flash-attention's FLASH_ATTN_CUDA_ARCHS, in tests/fixtures/torch_archs_env
    project = copy(FIXTURES / "torch_archs_env", tmp_path / "archs")
    document = init(tmp_path, project, "--torch-index", index)
    read = f"setup.py:{line_of(project / 'setup.py', 'os.getenv(')}"
    found = detected(document)
    assert found["build.targets-env"] == (
        "K3_CUDA_ARCHS: sms",
        f"{read}: the -gencode flags follow K3_CUDA_ARCHS (default 80;90), which each cell's "
        "sms reach through targets-env",
    )
    assert (found["sms"][0], found["ptx"][0]) == ("80 90", "90")
    assert document["changes"] == []  # no "hard-codes -gencode": the matrix's sms reach them
    text = (project / "matrix.yaml").read_text()
    assert "  targets-env:\n    K3_CUDA_ARCHS: sms\n" in text
    (cell,) = dry_run(tmp_path, project)["cells"]
    assert cell["inputs"]["K3_CUDA_ARCHS"] == "80;90"
    assert "warnings" not in cell  # no "own nvcc arch flags" warning: they follow the cell


def test_the_extension_template_is_told_what_to_change_with_file_and_line(
    tmp_path: Path, index: str
) -> None:
    project = copy(FIXTURES / "extension_template", tmp_path / "muladd")
    done = release(tmp_path, "init", str(project), "--torch-index", index)
    assert done.returncode == 0, done.stderr
    assert "needs a change before it builds:\n  setup.py:23: builds CUDA only when " in done.stdout
    assert (
        "fix: let one force it, e.g. `torch.cuda.is_available() or os.environ.get(" in done.stdout
    )
    assert "setup.py:37: py_limited_api is computed" in done.stdout
    text = (project / "matrix.yaml").read_text()
    assert "# - setup.py:23: builds CUDA only when torch.cuda.is_available()" in text
    assert 'abi3: "3.9"' in text
    (cell,) = dry_run(tmp_path, project)["cells"]
    assert cell["wheel"] == "muladd_ops-0.0.1-cp39-abi3-manylinux_2_34_x86_64.whl"


def test_a_setup_py_that_downloads_a_prebuilt_wheel_gets_the_variable_that_forces_the_build(
    tmp_path: Path, index: str
) -> None:
    project = copy(FIXTURES / "prebuilt_download", tmp_path / "prebuilt")
    document = init(tmp_path, project, "--torch-index", index)
    fetch = line_of(project / "setup.py", "urllib.request.urlretrieve(")
    switch = line_of(project / "setup.py", 'os.getenv("K3_PREBUILT_OPS_FORCE_BUILD"')
    assert detected(document)["build.env"] == (
        "K3_PREBUILT_OPS_FORCE_BUILD=TRUE",
        f"setup.py:{fetch}: CachedWheelsCommand.run() downloads a prebuilt wheel unless "
        f"K3_PREBUILT_OPS_FORCE_BUILD=TRUE (setup.py:{switch}), and a release ships the wheel "
        "its own build compiled",
    )
    assert document["changes"] == []
    assert '    K3_PREBUILT_OPS_FORCE_BUILD: "TRUE"\n' in (project / "matrix.yaml").read_text()
    (cell,) = dry_run(tmp_path, project)["cells"]
    assert cell["inputs"]["K3_PREBUILT_OPS_FORCE_BUILD"] == "TRUE"


STABLE_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

CXX_FLAGS = ["-O3", "-DTORCH_TARGET_VERSION=0x020a000000000000", "-DPy_LIMITED_API=0x030a0000"]
setup(
    name="stable-ops",
    version="0.2.0",
    ext_modules=[
        CUDAExtension(
            "stable_ops._C",
            ["csrc/ops.cpp", "csrc/ops.cu"],
            extra_compile_args={"cxx": CXX_FLAGS, "nvcc": ["-O3"]},
            py_limited_api=True,
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
"""


def test_init_and_the_dry_run_say_a_project_is_stable_abi_and_where_nvcc_misses_the_define(
    tmp_path: Path, index: str
) -> None:
    project = tmp_path / "stable"
    project.mkdir()
    (project / "setup.py").write_text(STABLE_SETUP)
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77", "torch>=2.10"]\n'
        'build-backend = "setuptools.build_meta"\n'
    )
    document = init(tmp_path, project, "--torch-index", index)
    note = (
        "setup.py:4: libtorch's stable ABI, TORCH_TARGET_VERSION torch 2.10: one wheel a "
        "platform for every torch from it (its wheel requires torch>=2.10, "
        "or from the first torch of its cell's CUDA major on the torch index)"
    )
    assert detected(document)["torch ABI"] == ("stable", note)
    (change,) = document["changes"]
    assert change["place"] == "setup.py:4"
    assert change["text"].startswith(
        'TORCH_TARGET_VERSION reaches the cxx compiler but not nvcc (extra_compile_args["nvcc"])'
    )
    (cell,) = dry_run(tmp_path, project)["cells"]
    # the dry run's document keeps its order: what the cell builds against, its notes, then it
    assert list(cell)[:5] == ["torch", "stable_abi", "stable_torch", "warnings", "cell"]
    assert cell["torch"].startswith("torch 2.11.0 ")  # the oldest its wheel admits on CUDA 13
    assert cell["stable_abi"] == note
    assert cell["stable_torch"].startswith("torch 2.11.0: the oldest torch >= 2.10")
    assert cell["warnings"] == [f"setup.py:4: {change['text']}"]
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    ("source", "backend", "cells"),
    [
        (FIXTURES / "cmake_kernels", "cmake", ["13.0-x86_64"]),
        (ROOT / "csrc", "release", ["13.0-x86_64", "13.0-aarch64"]),
    ],
    ids=["cmake", "csrc"],
)
def test_cmake_and_csrc_projects_build_dry_right_after(
    tmp_path: Path, source: Path, backend: str, cells: list[str]
) -> None:
    project = copy(source, tmp_path / source.name)
    document = init(tmp_path, project)
    assert document["backend"] == backend
    assert document["changes"] == []
    assert [c["cell"] for c in dry_run(tmp_path, project)["cells"]] == cells
    assert not (tmp_path / "cache").exists()


def test_a_cmake_project_that_enables_cuda_behind_a_cache_variable_gets_its_define(
    tmp_path: Path,
) -> None:
    """bitsandbytes' shape: COMPUTE_BACKEND defaults to cpu, and only `cuda` enables CUDA;
    init writes the define each cell passes, and the dry run passes it."""
    project = copy(FIXTURES / "cmake_kernels", tmp_path / "k")
    cmakelists = project / "CMakeLists.txt"
    text = cmakelists.read_text()
    assert "LANGUAGES CXX CUDA" in text
    cmakelists.write_text(
        text.replace("LANGUAGES CXX CUDA", "LANGUAGES CXX", 1).replace(
            "\n", '\nset(COMPUTE_BACKEND "cpu" CACHE STRING "cpu or cuda")\n'
            'if(${COMPUTE_BACKEND} STREQUAL "cuda")\n  set(BUILD_CUDA ON)\nendif()\n'
            "if(BUILD_CUDA)\n  enable_language(CUDA)\nendif()\n", 1,
        )
    )  # fmt: skip
    found = detected(init(tmp_path, project))
    declared = line_of(cmakelists, "set(COMPUTE_BACKEND")
    enabled = line_of(cmakelists, "enable_language(CUDA)")
    assert found["build.config-settings"] == (
        "cmake.define.COMPUTE_BACKEND=cuda",
        f"CMakeLists.txt:{enabled}: CUDA is enabled only where COMPUTE_BACKEND is cuda (through "
        f"BUILD_CUDA), and its default is cpu (CMakeLists.txt:{declared})",
    )
    assert '    cmake.define.COMPUTE_BACKEND: "cuda"\n' in (project / "matrix.yaml").read_text()
    (cell,) = dry_run(tmp_path, project)["cells"]
    assert cell["config_settings"]["cmake.define.COMPUTE_BACKEND"] == "cuda"


def test_existing_files_are_refused_without_force(tmp_path: Path) -> None:
    project = copy(FIXTURES / "cmake_kernels", tmp_path / "k")
    init(tmp_path, project)
    (project / "matrix.yaml").write_text("# mine\n")
    refused = release(tmp_path, "init", str(project))
    assert refused.returncode == 8
    assert refused.stderr.splitlines() == [
        f"error: {project / 'matrix.yaml'} and {project / '.github/workflows/release.yml'} "
        "already exist: release init replaces nothing",
        "hint: pass --force to write over them, or --workflow NAME.yml to write the caller "
        "beside it",
    ]
    assert (project / "matrix.yaml").read_text() == "# mine\n"
    replaced = init(tmp_path, project, "--force")
    assert [w["replaced"] for w in replaced["written"]] == [True, True]
    assert (project / "matrix.yaml").read_text().startswith("# yaml-language-server:")


def test_a_release_workflow_of_the_projects_own_stays_and_the_caller_goes_beside_it(
    tmp_path: Path,
) -> None:
    project = copy(FIXTURES / "cmake_kernels", tmp_path / "k")
    workflows = project / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "release.yml").write_text("name: ours\n")
    refused = release(tmp_path, "init", str(project))
    assert refused.returncode == 8
    assert refused.stderr.splitlines()[-1] == (
        "hint: pass --force to write over it, or --workflow NAME.yml to write the caller beside it"
    )
    assert not (project / "matrix.yaml").exists()
    document = init(tmp_path, project, "--workflow", "wheels-release.yml")
    assert [w["path"] for w in document["written"]] == [
        str(project / "matrix.yaml"),
        str(workflows / "wheels-release.yml"),
    ]
    assert (workflows / "release.yml").read_text() == "name: ours\n"
    caller = (workflows / "wheels-release.yml").read_text()
    comments = " ".join(line.strip(" #") for line in caller.splitlines())  # unwrapped
    assert "this repository, workflow wheels-release.yml, environment release" in comments
    for name in ("../release.yml", "x.txt", "a/b.yml", ".yml", "-x.yml"):
        bad = release(tmp_path, "init", str(project), "--force", f"--workflow={name}")
        assert bad.returncode == 2, name
        assert "is not a workflow file name" in bad.stderr, name
    assert (workflows / "release.yml").read_text() == "name: ours\n"


def test_the_workflow_goes_to_the_repository_root(tmp_path: Path) -> None:
    subprocess.run([GIT, "init", "-q", str(tmp_path / "repo")], check=True)
    project = copy(FIXTURES / "cmake_kernels", tmp_path / "repo" / "kernels")
    init(tmp_path, project)
    workflow = (tmp_path / "repo" / ".github" / "workflows" / "release.yml").read_text()
    assert "      matrix: kernels/matrix.yaml\n" in workflow
    assert not (project / ".github").exists()


def test_offline_or_out_of_reach_the_torch_is_a_todo_at_its_line(tmp_path: Path) -> None:
    with socket.socket() as bound:  # a port nothing listens on
        bound.bind(("127.0.0.1", 0))
        unreachable = f"http://127.0.0.1:{bound.getsockname()[1]}/simple/"
        project = copy(FIXTURES / "torch_ops", tmp_path / "ops")
        document = init(tmp_path, project, "--torch-index", unreachable)
    (note,) = [n for n in document["undecided"] if "no exact torch" in n["text"]]
    assert note["place"] == "pyproject.toml:5"
    assert f"cannot read {unreachable}torch/" in note["text"]
    assert "torch" not in detected(document)
    text = (project / "matrix.yaml").read_text()
    (line,) = [n for n, t in enumerate(text.splitlines(), start=1) if "torch: TODO" in t]
    refused = release(tmp_path, "build", "--dry-run", "--matrix", str(project / "matrix.yaml"))
    assert refused.returncode == 2
    assert f"matrix.yaml:{line}:" in refused.stderr
    offline = init(tmp_path, project, "--offline", "--force")
    assert any(
        n["text"] == "no exact torch pinned: --offline: no index was asked"
        for n in offline["undecided"]
    )


def test_a_directory_no_backend_fits_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    refused = release(tmp_path, "init", "plain")
    assert refused.returncode == 2
    (error, hint) = refused.stderr.splitlines()
    assert error.startswith(f"error: {tmp_path / 'plain'}: no build system release knows")
    assert hint.startswith("hint: ")
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == ["setup.py"]
    bad = release(tmp_path, "init", "plain", "--torch-index", "https://u:p@index.example/")
    assert bad.returncode == 2
    assert "the URL holds credentials" in bad.stderr
    assert "u:p" not in bad.stderr


# Directory names YAML and GitHub Actions read as something (issue 49, F1): each a project
# inside one repository, so that the workflow names it.
HOSTILE_NAMES = [
    "x: y", "a #b", "{a}", "[x]", "*s", "&a", "!t", "- d", "`b` $(id)", "'q\"", "%p |>",
    "é 日本 \U0001f600", "${HOME}", "? @x, ~", "null",
]  # fmt: skip


def test_the_workflow_written_for_a_hostile_directory_name_is_actionlint_and_zizmor_clean(
    tmp_path: Path,
) -> None:
    """F1: for each name, the workflow reads back with the name exactly and no expression
    but the tool's, and the real actionlint and zizmor find nothing in it; a name holding
    `${{` or a newline is refused, nothing written."""
    workflows = []  # written in-process; one run of each linter for them all
    for number, name in enumerate(HOSTILE_NAMES):
        root = tmp_path / f"repo{number}"
        project = copy(FIXTURES / "cmake_kernels", root / name)
        (root / ".git").mkdir()
        assert main(["init", str(project)]) == 0, name
        workflow = root / ".github" / "workflows" / "release.yml"
        jobs = YAML(typ="safe").load(workflow.read_text(encoding="utf-8"))["jobs"]
        assert jobs["build"]["with"]["matrix"] == jobs["verify"]["with"]["matrix"]
        assert jobs["build"]["with"]["matrix"] == f"{name}/matrix.yaml"
        workflows.append(workflow)
    bin_dir = Path(sys.executable).parent
    linted = subprocess.run(
        [str(bin_dir / "actionlint"), "-shellcheck=", "-pyflakes=", "-format", "{{json .}}"]
        + [str(w) for w in workflows],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert linted.returncode == 0, linted.stdout + linted.stderr
    audited = subprocess.run(
        [str(bin_dir / "zizmor"), "--offline", "--format", "json", *map(str, workflows)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert json.loads(audited.stdout) == [], audited.stdout
    assert audited.returncode == 0, audited.stderr
    for refused in ("${{ github.event.head_commit.message }}", "a\nb"):
        root = tmp_path / "refused"
        project = copy(FIXTURES / "cmake_kernels", root / refused)
        (root / ".git").mkdir()
        done = release(tmp_path, "init", str(project))
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("error: the matrix's path ")
        assert not (root / ".github").exists()
        assert not (project / "matrix.yaml").exists()
        shutil.rmtree(root)
