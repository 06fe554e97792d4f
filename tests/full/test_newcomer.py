"""The newcomer's path: the README's build command in a venv made as the README makes it
(the pip that Python bundles), from an empty toolchain cache; and the dependency floors of
pyproject.toml doing the same work (uv's lowest-direct resolution installs exactly them).

Both download the toolchains from PyPI: this is the path every new user takes first, and
nothing else in the suite starts from a pip this old or a cache this empty. In CI the
README's build command is .ci/run's main job, run from an empty cache in the clean clone:
the first test reads what it made instead of running it again (RELEASE_TEST_README_CHECKOUT
and RELEASE_TEST_README_CACHE).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from release import proc
from release.errors import ToolchainError
from release.toolchain import PIP_FLOOR, ZIG_PINS, PinSet, check_pip, install_pinset

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
GIT = shutil.which("git") or "git"
BASH = shutil.which("bash") or "bash"


def readme_setup_commands() -> list[str]:
    """The ```sh blocks under README.md's "## Set up", in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, flags=re.DOTALL)


def checkout_copy(dest: Path) -> Path:
    """The files git would give a fresh clone (tracked and untracked-not-ignored), copied."""
    listed = subprocess.run(
        [GIT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def newcomer_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["RELEASE_CACHE_DIR"] = str(cache)
    env.pop("CUDA_HOME", None)
    return env


def stock_python(where: Path) -> Path:
    """A venv made with `python3 -m venv`, its pip the one Python bundles."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    return where / "bin" / "python"


def pip_version(python: Path) -> Version:
    out = subprocess.run(
        [str(python), "-m", "pip", "--version"], check=True, capture_output=True, text=True
    ).stdout
    return Version(out.split()[1])


# Set by .ci/run once it has run the README's build command in the checkout the first names
# (the clean clone CI tests) from the empty cache the second names: its main job is this
# test's build. Two variables, so that neither path's characters (a colon) matter.
README_CHECKOUT = "RELEASE_TEST_README_CHECKOUT"
README_CACHE = "RELEASE_TEST_README_CACHE"


def readme_build(build_command: str, tmp_path: Path) -> tuple[Path, Path]:
    """Where the README's build command ran from an empty cache, and that cache: .ci/run's
    main job where it ran it (the same command, so not built a second time), else a run of
    it here in a copy of the checkout."""
    checkout, ran_cache = os.environ.get(README_CHECKOUT), os.environ.get(README_CACHE)
    if checkout or ran_cache:
        assert checkout, f"{README_CACHE} is set without {README_CHECKOUT}"
        assert ran_cache, f"{README_CHECKOUT} is set without {README_CACHE}"
        return Path(checkout), Path(ran_cache)
    project = checkout_copy(tmp_path / "clone")
    cache = tmp_path / "cache"
    done = subprocess.run(
        [BASH, "-euo", "pipefail", "-c", build_command],
        check=False, cwd=project, env=newcomer_env(cache), capture_output=True, text=True,
        timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, proc.tail(done.stdout + done.stderr, 40)
    return project, cache


def test_readme_build_command_from_an_empty_cache(tmp_path: Path) -> None:
    build_command, test_command = readme_setup_commands()
    assert build_command.startswith("python3 -m venv .venv && ")
    assert test_command.endswith(".venv/bin/pytest")
    project, cache = readme_build(build_command, tmp_path)
    manifest = json.loads((project / "dist" / "manifest.json").read_text())
    assert len(manifest["wheels"]) == 4
    for entry in manifest["wheels"]:
        wheel = project / "dist" / entry["filename"]
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == entry["sha256"], wheel
    assert any((cache / "toolchains").iterdir()), "nothing provisioned into the empty cache"


def test_stock_pip_is_refused_before_any_download(tmp_path: Path) -> None:
    python = stock_python(tmp_path / "venv")
    if pip_version(python) >= Version(PIP_FLOOR):
        pytest.skip(f"this Python bundles pip {pip_version(python)}, not older than {PIP_FLOOR}")
    with pytest.raises(ToolchainError) as caught:
        check_pip(proc.run, python=str(python), env=newcomer_env(tmp_path / "cache"))
    message = "\n".join(caught.value.lines())
    assert f"has pip {pip_version(python)}, older than {PIP_FLOOR}" in message
    assert f"'pip>={PIP_FLOOR}'" in message


def test_a_rejected_option_is_named_as_such_not_as_the_network(tmp_path: Path) -> None:
    python = stock_python(tmp_path / "venv")
    if pip_version(python) >= Version(PIP_FLOOR):
        pytest.skip(f"this Python bundles pip {pip_version(python)}, which takes every option")
    zig = PinSet("zig", ZIG_PINS, "linux_x86_64")
    with pytest.raises(ToolchainError) as caught:
        install_pinset(
            zig, tmp_path / "zig", proc.run, python=str(python), env=newcomer_env(tmp_path)
        )
    assert "pip installing ziglang" in caught.value.message
    assert "rejected its arguments" in caught.value.message
    assert "--progress-bar: invalid choice: 'raw'" in caught.value.message
    assert caught.value.hint is not None
    assert "PyPI is reachable" not in caught.value.hint
    assert f"pip>={PIP_FLOOR}" in caught.value.hint
    assert not (tmp_path / "zig").exists()


def test_the_dependency_floors_build_a_cell(tmp_path: Path) -> None:
    """Every dependency at the lowest version pyproject.toml admits (pip included) builds,
    repairs, retags and inspects a cell from an empty cache (for one SM: the work is the
    same for each)."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv is not None
    venv = tmp_path / "floors"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    clone = checkout_copy(tmp_path / "clone")
    text = (clone / "matrix.yaml").read_text(encoding="utf-8")
    for shipped, one in (("sms: [75, 80, 86, 89, 90, 100]", "sms: [90]"), ("ptx: 100", "ptx: 90")):
        assert shipped in text
        text = text.replace(shipped, one)
    (clone / "matrix.yaml").write_text(text, encoding="utf-8")
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), "--resolution", "lowest-direct",
         "-e", str(clone)],
        check=True,
    )  # fmt: skip
    assert pip_version(python) == Version(PIP_FLOOR)
    out = tmp_path / "dist"
    done = subprocess.run(
        [str(venv / "bin" / "release"), "build", "--cuda", "12.9", "--arch", "x86_64",
         "--out", str(out), "--json"],
        check=False, cwd=tmp_path / "clone", env=newcomer_env(tmp_path / "cache"),
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, proc.tail(done.stdout + done.stderr, 40)
    document = json.loads(done.stdout)
    assert [c["ok"] for c in document["cells"]] == [True]
