"""Real pip against a PyPI-like index holding torch 2.13.0 and a find-links folder holding
torch 2.13.0+cpu (this machine's pip is set up just so, and so is anyone's whose pip has
PyTorch's CPU index as an extra index): `torch==2.13.0` takes the CPU build, pip ranking
the local label above the plain version; the pin a torch cell installs PyPI's torch with
takes the plain one."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from release.backends.torch_extension import TorchEnvSpec
from release.toolchain.torchenv import torch_pin

pytestmark = pytest.mark.slow


def fake_torch(folder: Path, version: str) -> Path:
    """A wheel named torch at `version`, holding its metadata alone."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    members = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    rows = []
    for name, text in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        rows.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    rows.append(f"{info}/RECORD,,")
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
        archive.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return path


def pip_alone() -> dict[str, str]:
    """The environment without this machine's pip settings (its cap on torch among them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull}


def chosen(tmp_path: Path, requirement: str) -> str:
    """The torch version pip would install for `requirement`."""
    index = tmp_path / "index"
    plain = fake_torch(index / "torch", "2.13.0")
    (index / "torch" / "index.html").write_text(f'<a href="{plain.name}">{plain.name}</a>')
    fake_torch(tmp_path / "links", "2.13.0+cpu")
    report = tmp_path / "report.json"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
            "--ignore-installed", "--report", str(report),
            "--index-url", f"{index.as_uri()}/", "--find-links", str(tmp_path / "links"),
            requirement,
        ],
        check=True, capture_output=True, env=pip_alone(),
    )  # fmt: skip
    (install,) = json.loads(report.read_text())["install"]
    return str(install["metadata"]["version"])


def test_pip_ranks_the_local_cpu_build_above_the_plain_version(tmp_path: Path) -> None:
    assert chosen(tmp_path, "torch==2.13.0") == "2.13.0+cpu"


@pytest.mark.parametrize("index_url", [None, "https://pypi.org/simple/"])
def test_a_cell_of_pypis_torch_installs_the_plain_version(
    tmp_path: Path, index_url: str | None
) -> None:
    spec = TorchEnvSpec(
        torch=Version("2.13.0"), cuda="13.0", arch="x86_64", python="3.11",
        index_url=index_url, requirements=(), frontend="build==1.2.2",
    )  # fmt: skip
    assert chosen(tmp_path, torch_pin(spec)) == "2.13.0"
