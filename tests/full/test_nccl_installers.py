"""NCCL override files against the real uv and pip: what each installer resolves and installs
with them over an engine that pins an older NCCL (real resolution: the full tier)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from release.cli import main

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def make_wheel(directory: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal, valid, pure-Python wheel (what uv and pip need to resolve)."""
    dist = name.replace("-", "_")
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{dist}/__init__.py": b"",
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires)
        ).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for arcname, data in files.items():
            archive.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{arcname},sha256={digest.decode()},{len(data)}")
        record.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="module")
def find_links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NCCL for both majors in two versions, and an engine that pins the older one."""
    directory = tmp_path_factory.mktemp("links")
    for major in (12, 13):
        for version in ("2.26.2", "2.30.7"):
            make_wheel(directory, f"nvidia-nccl-cu{major}", version)
        make_wheel(directory, f"engine-cu{major}", "1.0", (f"nvidia-nccl-cu{major}==2.26.2",))
    return directory


@pytest.fixture(scope="module")
def override_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("nccl")
    assert main(["nccl", "--matrix", str(REPO / "matrix.yaml"), "--out", str(out)]) == 0
    return out


def uv_compile(
    requirement: str, links: Path, *extra: str, env: dict[str, str] | None = None
) -> str:
    result = subprocess.run(
        [
            str(BIN / "uv"),
            "pip",
            "compile",
            "-",
            "--no-index",
            "--find-links",
            str(links),
            "--python-version",
            "3.11",
            "--no-header",
            "--no-annotate",
            "--quiet",
            *extra,
        ],
        input=requirement + "\n",
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(BIN), "UV_NO_CACHE": "1", "HOME": str(links), **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_cuda_major_gets_its_files(override_dir: Path) -> None:
    names = sorted(p.name for p in override_dir.iterdir())
    assert names == [
        "cu12-constraints.txt",
        "cu12-reinstall.txt",
        "cu12.txt",
        "cu13-constraints.txt",
        "cu13-reinstall.txt",
        "cu13.txt",
    ]
    for major in (12, 13):
        lines = [
            line
            for line in (override_dir / f"cu{major}.txt").read_text().splitlines()
            if line and not line.startswith("#")
        ]
        assert lines == [f"nvidia-nccl-cu{major}==2.30.7"]


@pytest.mark.parametrize("major", [12, 13])
def test_uv_override_wins_over_a_pinned_nccl(
    major: int, find_links: Path, override_dir: Path
) -> None:
    without = uv_compile(f"engine-cu{major}", find_links)
    assert f"nvidia-nccl-cu{major}==2.26.2" in without
    with_override = uv_compile(
        f"engine-cu{major}", find_links, "--override", str(override_dir / f"cu{major}.txt")
    )
    assert f"nvidia-nccl-cu{major}==2.30.7" in with_override
    assert "2.26.2" not in with_override


def test_uv_override_env_var_applies_too(find_links: Path, override_dir: Path) -> None:
    out = uv_compile("engine-cu12", find_links, env={"UV_OVERRIDE": str(override_dir / "cu12.txt")})
    assert "nvidia-nccl-cu12==2.30.7" in out


def test_pip_constraints_pick_the_pinned_nccl(
    find_links: Path, override_dir: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-index",
            "--find-links",
            str(find_links),
            "--report",
            str(report),
            "--quiet",
            "-c",
            str(override_dir / "cu12-constraints.txt"),
            "nvidia-nccl-cu12",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert '"version": "2.30.7"' in report.read_text()


def venv_with_pip(where: Path) -> Path:
    """A fresh virtual environment with pip; its python."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True)
    return where / "bin" / "python"


def installed(python: Path) -> dict[str, str]:
    """Distribution name -> version of what `python`'s environment holds."""
    done = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {d["name"]: d["version"] for d in json.loads(done.stdout)}


def test_pip_recipe_installs_the_pinned_nccl_over_an_exact_pin(
    find_links: Path, override_dir: Path, tmp_path: Path
) -> None:
    """The documented pip steps against an engine that pins the older NCCL exactly (as
    torch pins nvidia-nccl-cu12): constraints cannot do it, the reinstall step does."""
    python = venv_with_pip(tmp_path / "venv")
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "install", "--no-index",
           "--find-links", str(find_links)]  # fmt: skip
    refused = subprocess.run(
        [*pip, "-c", str(override_dir / "cu12-constraints.txt"), "engine-cu12"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode != 0
    assert "ResolutionImpossible" in refused.stdout + refused.stderr
    subprocess.run([*pip, "engine-cu12"], check=True, capture_output=True)
    assert installed(python)["nvidia-nccl-cu12"] == "2.26.2"
    subprocess.run(
        [*pip, "--no-deps", "--force-reinstall", "-r", str(override_dir / "cu12-reinstall.txt")],
        check=True,
        capture_output=True,
    )
    assert installed(python)["nvidia-nccl-cu12"] == "2.30.7"
    assert installed(python)["engine-cu12"] == "1.0"


def test_uv_recipe_installs_the_pinned_nccl_over_an_exact_pin(
    find_links: Path, override_dir: Path, tmp_path: Path
) -> None:
    python = venv_with_pip(tmp_path / "venv")
    subprocess.run(
        [str(BIN / "uv"), "pip", "install", "--python", str(python), "--no-index",
         "--find-links", str(find_links), "--override", str(override_dir / "cu12.txt"),
         "engine-cu12"],
        check=True,
        capture_output=True,
        env={"PATH": str(BIN), "UV_NO_CACHE": "1", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert installed(python)["nvidia-nccl-cu12"] == "2.30.7"
