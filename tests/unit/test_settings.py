"""The layered settings (release/building/settings.py): the command line over the environment
over matrix.yaml over this machine, once for each setting, each value with its source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from release.building.settings import (
    DEFAULT_EPOCH,
    GivenOptions,
    Machine,
    Sourced,
    layered,
    source_date_epoch,
)
from release.errors import ConfigError, FileError
from release.matrix import Matrix, matrix_from_text
from release.matrix.compilecache import CompileCache
from release.proc import Completed, Runner

HOME = Path("/home/someone")
MACHINE = Machine(home=HOME, cpus=8, memory=32 << 30)
EPOCH = Sourced(1700000000, "$SOURCE_DATE_EPOCH")


def shipped_matrix(tmp_path: Path, extra: str = "") -> Matrix:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text(
        '[project]\nname = "k3-kernels"\nversion = "0.1.0"\n'
    )
    text = (
        "project: proj\n"
        'defaults: {arches: [x86_64], sms: [90], ptx: 90, manylinux: "2_28"}\n'
        'cuda: {"13.0": {destination: pypi}}\n'
        "destinations: {pypi: {kind: pypi}}\n" + extra
    )
    return matrix_from_text(text, tmp_path / "matrix.yaml")


class GitLog(Runner):
    """`git log -1 --format=%ct` answering `output` (exit `code`); counts its calls."""

    def __init__(self, output: str, code: int = 0) -> None:
        self.output = output
        self.code = code
        self.calls: list[list[str]] = []

    def __call__(self, cmd: Sequence[str], *, env: Mapping[str, str], **options: Any) -> Completed:
        self.calls.append(list(cmd))
        return Completed(returncode=self.code, output=self.output, seconds=0.0, log=None)


def test_the_defaults_name_themselves(tmp_path: Path) -> None:
    settings = layered(GivenOptions(), {}, shipped_matrix(tmp_path), MACHINE, epoch=EPOCH)
    assert settings.cache_dir == Sourced(HOME / ".cache" / "cuda-wheel-release", "default")
    assert settings.cuda_home == Sourced(None, "default")
    assert settings.compile_cache == Sourced(CompileCache(), "default")
    assert settings.compile_jobs == Sourced(
        None, "matrix.yaml build.compile-jobs, else this machine"
    )
    assert [row[0] for row in settings.rows()] == [
        "cache dir", "CUDA_HOME", "compile cache", "compile jobs", "SOURCE_DATE_EPOCH",
    ]  # fmt: skip


def test_the_command_line_wins_over_the_environment_over_the_matrix(tmp_path: Path) -> None:
    matrix = shipped_matrix(tmp_path, "compile-cache: {storage: none}\n")
    environ = {  # directories this user may create, as a cache dir from the environment is
        "RELEASE_CACHE_DIR": str(tmp_path / "env/cache"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "CUDA_HOME": "/env/cuda",
        "RELEASE_COMPILE_CACHE": "local:/env/compile",
    }
    from_env = layered(GivenOptions(), environ, matrix, MACHINE, epoch=EPOCH)
    assert from_env.cache_dir == Sourced(tmp_path / "env/cache", "$RELEASE_CACHE_DIR")
    assert from_env.cuda_home == Sourced(Path("/env/cuda"), "$CUDA_HOME")
    assert from_env.compile_cache.source == "$RELEASE_COMPILE_CACHE"
    assert from_env.compile_cache.value.dir == Path("/env/compile")

    given = GivenOptions(
        cache_dir=Path("/cli/cache"),
        cuda_home=Path("/cli/cuda"),
        compile_cache=CompileCache(storage="none"),
        compile_jobs=3,
    )
    from_cli = layered(given, environ, matrix, MACHINE, epoch=EPOCH)
    assert from_cli.cache_dir == Sourced(Path("/cli/cache"), "--cache-dir")
    assert from_cli.cuda_home == Sourced(Path("/cli/cuda"), "--cuda-home")
    assert from_cli.compile_cache == Sourced(CompileCache(storage="none"), "--compile-cache")
    assert from_cli.compile_jobs == Sourced(3, "--compile-jobs")

    xdg = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    from_matrix = layered(GivenOptions(), xdg, matrix, MACHINE, epoch=EPOCH)
    assert from_matrix.compile_cache == Sourced(
        CompileCache(storage="none"), "matrix.yaml compile-cache"
    )
    assert from_matrix.cache_dir == Sourced(tmp_path / "xdg/cuda-wheel-release", "$XDG_CACHE_HOME")


def test_a_compile_cache_variable_that_is_not_one_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        layered(
            GivenOptions(),
            {"RELEASE_COMPILE_CACHE": "ftp://nowhere"},
            shipped_matrix(tmp_path),
            MACHINE,
            epoch=EPOCH,
        )
    assert caught.value.problems[0].startswith("RELEASE_COMPILE_CACHE: ")
    assert caught.value.hint == "unset RELEASE_COMPILE_CACHE to use matrix.yaml's compile-cache"


def test_a_cache_dir_or_cuda_home_with_a_line_break_names_where_it_came_from(
    tmp_path: Path,
) -> None:
    """CMake cut RELEASE_CACHE_DIR at its line break: the cell failed as "the PEP 517 build
    failed", the cause in CMake's log."""
    matrix = shipped_matrix(tmp_path)
    for given, environ, source in (
        (GivenOptions(), {"RELEASE_CACHE_DIR": "/cache/a\nb"}, "$RELEASE_CACHE_DIR"),
        (GivenOptions(cache_dir=Path("/cache/a\tb")), {}, "--cache-dir"),
        (GivenOptions(), {"CUDA_HOME": "/usr/local/cuda\n"}, "$CUDA_HOME"),
        (GivenOptions(), {"TMPDIR": "/scratch/a\nb"}, "$TMPDIR"),
    ):
        with pytest.raises(ConfigError) as caught:
            layered(given, environ, matrix, MACHINE, epoch=EPOCH)
        (problem,) = caught.value.problems
        assert problem.startswith(f"{source}: ")
        assert problem.endswith("holds a control character")
    # CMake's list separator split the cache's path; a link to a directory of an odd name
    # passed the check of the path as given
    with pytest.raises(ConfigError) as caught:
        layered(GivenOptions(cache_dir=Path("/cache/c;d")), {}, matrix, MACHINE, epoch=EPOCH)
    assert caught.value.problems == (
        "--cache-dir: '/cache/c;d' holds a ';', CMake's list separator",
    )
    odd = tmp_path / "odd\nname"
    odd.mkdir()
    (tmp_path / "cache").symlink_to(odd)
    given = GivenOptions(cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigError) as caught:
        layered(given, {}, matrix, MACHINE, epoch=EPOCH)
    (problem,) = caught.value.problems
    assert problem.startswith("--cache-dir: ")
    assert problem.endswith("... holds a control character")  # the path cut short


def test_the_epoch_is_the_environments_then_a_recorded_builds_then_the_last_commits() -> None:
    project = Path("/p")
    recorded = Sourced[int | None](1600000000, "the timestamp of dist/manifest.json")
    git = GitLog("1650000000\n")
    given = source_date_epoch({"SOURCE_DATE_EPOCH": "1700000000"}, project, git, recorded=recorded)
    assert given == Sourced(1700000000, "$SOURCE_DATE_EPOCH")
    assert source_date_epoch({}, project, git, recorded=recorded) == Sourced(
        1600000000, "the timestamp of dist/manifest.json"
    )
    assert git.calls == []  # neither asked git
    assert source_date_epoch({}, project, git) == Sourced(1650000000, "the time of the last commit")
    assert git.calls == [["git", "-C", "/p", "log", "-1", "--format=%ct"]]
    no_git = source_date_epoch({}, project, GitLog("fatal: not a git repository", code=128))
    assert no_git == Sourced(DEFAULT_EPOCH, "default: no git history")
    unrecorded = Sourced[int | None](None, "the timestamp of an old manifest")
    assert source_date_epoch({}, project, git, recorded=unrecorded).source == (
        "the time of the last commit"
    )


@pytest.mark.parametrize("variable", ["RELEASE_CACHE_DIR", "XDG_CACHE_HOME"])
def test_a_cache_dir_from_the_environment_is_checked_as_the_option_is(
    tmp_path: Path, variable: str
) -> None:
    # RELEASE_CACHE_DIR=/dev/null passed a dry run; --cache-dir /dev/null was exit 8
    (tmp_path / "file").write_text("")
    with pytest.raises(FileError) as caught:
        layered(
            GivenOptions(),
            {variable: str(tmp_path / "file")},
            shipped_matrix(tmp_path),
            MACHINE,
            epoch=EPOCH,
        )
    assert caught.value.exit_code == 8
    if variable == "RELEASE_CACHE_DIR":
        assert caught.value.message == (
            f"$RELEASE_CACHE_DIR {tmp_path / 'file'}: is a file, not a directory"
        )
    else:
        assert caught.value.message.startswith("$XDG_CACHE_HOME ")
