"""matrix.yaml's build.requires reach an isolated build (release.toolchain.frontend, as the
build stage runs it): a project whose build imports a module its pyproject does not declare
fails under `python -m build`, its log read as that module and build.requires; through the
frontend with the requirement it builds. Real processes (pypa/build, pip) on this machine,
the requirement from a local directory of wheels: no index is asked."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from release.building.diagnose import failure_cause
from release.building.pipeline import build_command
from tests.integration.wheels import make_wheel

BACKEND = '''\
"""A PEP 517 backend that needs a module its project does not declare (as DeepGEMM's
setup.py imports tvm_ffi)."""
import base64, hashlib, zipfile


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    import k3_kernels  # noqa: F401  (only the matrix's build.requires brings it)

    name = "jit_kernels-0.1.0"
    files = {
        f"{name}.dist-info/METADATA": b"Metadata-Version: 2.1\\nName: jit-kernels\\n"
        b"Version: 0.1.0\\n",
        f"{name}.dist-info/WHEEL": b"Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\n"
        b"Tag: py3-none-any\\n",
    }
    lines = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        lines.append(f"{path},sha256={digest.decode()},{len(data)}")
    lines.append(f"{name}.dist-info/RECORD,,")
    files[f"{name}.dist-info/RECORD"] = ("\\n".join(lines) + "\\n").encode()
    filename = f"{name}-py3-none-any.whl"
    with zipfile.ZipFile(f"{wheel_directory}/{filename}", "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return filename
'''


def project(where: Path) -> Path:
    where.mkdir()
    (where / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
        '[project]\nname = "jit-kernels"\nversion = "0.1.0"\n',
        encoding="utf-8",
    )
    (where / "backend.py").write_text(BACKEND, encoding="utf-8")
    return where


def offline(wheels: Path) -> dict[str, str]:
    """pip finds packages in `wheels` alone, with none of this machine's configuration."""
    return {
        "PATH": os.environ["PATH"],
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def test_the_matrixs_build_requirement_reaches_the_isolated_build(tmp_path: Path) -> None:
    source = project(tmp_path / "jit-kernels")
    wheels = tmp_path / "wheels"
    make_wheel(wheels, platform="any")  # k3-kernels 0.1.0, module k3_kernels
    env = offline(wheels)

    plain = build_command(sys.executable, source, tmp_path / "out-plain")
    failed = subprocess.run(
        plain, capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert failed.returncode != 0
    cause = failure_cause((failed.stdout + failed.stderr).splitlines())
    assert cause is not None
    assert cause.startswith("No module named 'k3_kernels' (")
    assert "to build.requires in matrix.yaml" in cause

    out = tmp_path / "out"
    command = build_command(sys.executable, source, out, requires=("k3-kernels==0.1.0",))
    built = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "k3-kernels==0.1.0" in built.stdout  # what it installed, said in the log
    (wheel,) = out.glob("*.whl")
    assert wheel.name == "jit_kernels-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        assert "jit_kernels-0.1.0.dist-info/METADATA" in archive.namelist()
