"""The `[tool.cibuildwheel]` configuration of csrc/, checked with cibuildwheel itself.

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

import pytest

# cibuildwheel 3 needs Python 3.11 (pyproject.toml's test extra installs it from there on)
pytest.importorskip("cibuildwheel", reason="cibuildwheel 3 needs Python 3.11 or newer")

from cibuildwheel.environment import (  # type: ignore[import-not-found, unused-ignore]
    parse_environment,
)
from cibuildwheel.options import (  # type: ignore[import-not-found, unused-ignore]
    EnvironmentFormat,
)

from release.building.settings import BuildSettings
from release.building.stage import cell_inputs_for
from release.cli import build_parser
from release.commands.env import dotenv_text
from release.matrix import load_matrix
from release.toolchain import Toolchain, resolve

ROOT = Path(__file__).resolve().parents[2]
CIBUILDWHEEL = Path(sys.executable).with_name("cibuildwheel")
# where the configuration has `release env` write the inputs inside the container
CONTAINER_ENV_FILE = "/tmp/release-build.env"  # noqa: S108 (a path in the container)


def config() -> dict[str, Any]:
    with (ROOT / "csrc" / "pyproject.toml").open("rb") as handle:
        data: dict[str, Any] = tomllib.load(handle)["tool"]["cibuildwheel"]
    return data


def identifiers(archs: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIBW_")}
    result = subprocess.run(
        [str(CIBUILDWHEEL), "--print-build-identifiers", "--platform", "linux", "csrc"],
        cwd=ROOT,
        env={**env, "CIBW_ARCHS": archs},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.split()


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_one_build_per_platform(arch: str) -> None:
    assert identifiers(arch) == [f"cp312-manylinux_{arch}"]


def test_both_platforms_in_stock_manylinux_2_28_images() -> None:
    assert identifiers("x86_64 aarch64") == ["cp312-manylinux_x86_64", "cp312-manylinux_aarch64"]
    options = config()
    assert options["manylinux-x86_64-image"] == "manylinux_2_28"
    assert options["manylinux-aarch64-image"] == "manylinux_2_28"


def fake_toolchains() -> list[Toolchain]:
    """One nvcc and one NVRTC toolchain, as provisioning would describe them (no tools run)."""
    out = []
    for cuda in ("13.0", "12.9"):
        plan = resolve(cuda, "x86_64", cuda_home=None, cache_dir=Path("/cache/toolchains"))
        nvcc = plan.device_compiler == "nvcc"
        out.append(
            Toolchain(
                plan=plan,
                device_version=f"{cuda}.1",
                cuda_home=Path("/cache/toolchains/nvcc/nvidia/cu13") if nvcc else None,
                nvrtc_lib=None if nvcc else Path("/cache/nvrtc/lib/libnvrtc.so.12"),
                nvfatbin_lib=None if nvcc else Path("/cache/nvrtc/lib/libnvfatbin.so.12"),
                include_dirs=() if nvcc else (Path("/cache/a/include"), Path("/cache/b/include")),
                cc=("/cache/zig dir/zig", "cc", "-target", "x86_64-linux-gnu.2.28"),
                cc_version="0.17.1",
                cuobjdump=Path("/cache/cuobjdump"),
                inspector_version="13.2.86",
            )
        )
    return out


def evaluate(env_file: Path) -> dict[str, str]:
    """cibuildwheel's own evaluation of the `environment` table, reading `env_file`."""
    table = dict(config()["linux"]["environment"])
    assert table["RELEASE_ENV_FILE"] == CONTAINER_ENV_FILE
    table["RELEASE_ENV_FILE"] = str(env_file)
    parsed = parse_environment(EnvironmentFormat().format_table(table))
    result = parsed.as_dictionary({"PATH": os.environ["PATH"]})
    return {k: v for k, v in result.items() if k not in ("PATH", "RELEASE_ENV_FILE")}


def test_environment_reads_every_build_input_release_build_would_give(tmp_path: Path) -> None:
    matrix = load_matrix(ROOT / "matrix.yaml")
    cells = {str(c.cuda): c for c in matrix.cells if c.arch == "x86_64"}
    wanted: set[str] = set()
    for toolchain in fake_toolchains():
        cell = cells[toolchain.plan.cuda]
        settings = BuildSettings(
            matrix=matrix, cells=(cell,), out=Path("/project/dist"), cache_dir=Path("/cache")
        )
        inputs, _ = cell_inputs_for(settings, toolchain, cell)
        wanted |= set(inputs)
        env_file = tmp_path / f"{toolchain.plan.cuda}.env"
        env_file.write_text(dotenv_text(inputs), encoding="utf-8")
        got = evaluate(env_file)
        assert {k: got[k] for k in inputs} == inputs
        assert all(not v for k, v in got.items() if k not in inputs)
    assert set(evaluate(tmp_path / "absent.env")) == wanted
    # before before-all has written the file, every input is empty
    assert set(evaluate(tmp_path / "absent.env").values()) == {""}


def release_commands(command: str, values: Mapping[str, str]) -> list[list[str]]:
    out = []
    for part in command.split("&&"):
        words = shlex.split(part.format(**values))
        words = [os.path.expandvars(w) for w in words]
        if words and words[0].endswith("release"):
            out.append(words[1:])
    return out


def test_container_commands_parse_with_the_real_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    linux = config()["linux"]
    monkeypatch.setenv("RELEASE_CUDA", "12.9")
    monkeypatch.setenv("AUDITWHEEL_ARCH", "aarch64")
    monkeypatch.setenv("RELEASE_ENV_FILE", CONTAINER_ENV_FILE)
    values = {
        "project": "/project",
        "package": "/project/csrc",
        "wheel": "/container/built/k.whl",
        "dest_dir": "/container/repaired",
    }
    commands = release_commands(" && ".join(linux["before-all"]), values)
    commands += release_commands(linux["repair-wheel-command"], values)
    assert [c[0] for c in commands] == ["env", "env"]
    parser = build_parser()
    provision, repair = (parser.parse_args(c) for c in commands)
    assert (provision.cuda, provision.arch, provision.out) == (
        "12.9",
        "aarch64",
        Path(CONTAINER_ENV_FILE),
    )
    assert (repair.record, repair.dist) == (
        Path("/container/built/k.whl"),
        Path("/container/repaired"),
    )
    assert provision.matrix == repair.matrix == Path("/project/matrix.yaml")
