"""matrix.yaml's `build.prepare` against a command that turns on release: one that makes
the output or the version file a symbolic link out of the checkout (release deleted, built
or wrote there), and one that leaves a process behind. The cell fails naming the key, and
nothing outside the checkout is touched. The tiny checkout is test_prepare_step's.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from release.building.preparestep import prepared, step_of
from release.building.settings import CellFailure
from release.matrix import Matrix, load_matrix
from tests.integration.test_prepare_step import MATRIX, checkout, environment

__all__ = ["checkout"]  # the fixture


STAGED = "import subprocess; subprocess.run([sys.executable, 'stage.py', '--into', 'staged'])"


def hostile(checkout: Path, script: str, **keys: str) -> Matrix:
    """The tiny release, its command `python3 hostile.py` (which stages first), and
    build.prepare's `keys` (output=...) replaced."""
    text = MATRIX.replace("command: python3 stage.py --into staged", "command: python3 hostile.py")
    for key, value in keys.items():
        old = {"output": "output: staged", "timeout": "output: staged"}[key]
        new = f"output: staged\n    timeout: {value}" if key == "timeout" else f"output: {value}"
        text = text.replace(old, new)
    (checkout / "matrix.yaml").write_text(text)
    (checkout / "hostile.py").write_text(f"import os, shutil, sys\n{script}\n")
    return load_matrix(checkout / "matrix.yaml")


def failed_step(matrix: Matrix, log: Path, dist: Path | None = None) -> str:
    step = step_of(matrix, matrix.cells[0], own=[dist], dist=dist)
    assert step is not None
    with (
        pytest.raises(CellFailure) as failed,
        prepared(step, "1.2.3", env=environment(), log=log),
    ):
        pytest.fail("the build ran")
    return failed.value.error


def test_an_output_whose_parent_the_command_links_out_is_never_removed_through(
    checkout: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    (victim / "staged").mkdir(parents=True)
    (victim / "staged" / "keep.txt").write_text("not the checkout's\n")
    matrix = hostile(
        checkout,
        f"shutil.rmtree('out', ignore_errors=True); os.symlink({str(victim)!r}, 'out')",
        output="out/staged",
    )
    assert failed_step(matrix, tmp_path / "log") == (
        "the prepare step `python3 hostile.py` made out a symbolic link, through which "
        "build.prepare.output out/staged is reached: release neither builds nor writes "
        "through a link (stage into a directory of the checkout itself)"
    )
    assert (victim / "staged" / "keep.txt").read_text() == "not the checkout's\n"
    assert not (checkout / "out").exists()
    assert not (checkout / "out").is_symlink()


def test_a_version_file_the_command_links_out_is_put_back_as_a_file_not_written_through(
    checkout: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("ORIGINAL\n")
    matrix = hostile(
        checkout,
        f"{STAGED}\n"
        f"os.remove('tiny_src/VERSION'); os.symlink({str(outside)!r}, 'tiny_src/VERSION')",
    )
    assert failed_step(matrix, tmp_path / "log") == (
        "the prepare step `python3 hostile.py` made tiny_src/VERSION a symbolic link, "
        "through which build.prepare.version-file tiny_src/VERSION is reached: release "
        "neither builds nor writes through a link (stage into a directory of the checkout "
        "itself)"
    )
    assert outside.read_text() == "ORIGINAL\n"
    version = checkout / "tiny_src" / "VERSION"
    assert not version.is_symlink()
    assert version.read_text() == "1.2.3\n"


def test_a_version_file_the_command_hard_links_out_is_never_written_through(
    checkout: Path, tmp_path: Path
) -> None:
    """A hard link shares the file's inode: the restore truncated it, and the file outside
    the checkout held the cell's version."""
    outside = tmp_path / "outside.txt"
    outside.write_text("ORIGINAL\n")
    matrix = hostile(
        checkout,
        f"{STAGED}\nos.remove('tiny_src/VERSION'); os.link({str(outside)!r}, 'tiny_src/VERSION')",
    )
    step = step_of(matrix, matrix.cells[0])
    assert step is not None
    version = checkout / "tiny_src" / "VERSION"
    saved = version.read_bytes()
    with prepared(step, "1.2.3", env=environment(), log=tmp_path / "log"):
        pass
    assert outside.read_text() == "ORIGINAL\n"
    assert version.read_bytes() == saved
    assert version.stat().st_ino != outside.stat().st_ino


def test_an_output_the_command_makes_a_link_to_another_project_is_not_built(
    checkout: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "tiny-staged"\nversion = "6.6.6"\n')
    matrix = hostile(
        checkout,
        f"shutil.rmtree('staged', ignore_errors=True); os.symlink({str(other)!r}, 'staged')",
    )
    assert failed_step(matrix, tmp_path / "log").startswith(
        "the prepare step `python3 hostile.py` made staged a symbolic link, through which "
        "build.prepare.output staged is reached"
    )
    assert sorted(p.name for p in other.iterdir()) == ["pyproject.toml"]
    assert not (checkout / "staged").is_symlink()
    assert not (checkout / "staged").exists()


def test_a_file_the_command_writes_into_releases_output_is_removed_and_fails_the_cell(
    checkout: Path,
) -> None:
    dist = checkout / "dist"
    (dist / "logs").mkdir(parents=True)
    (dist / "earlier.whl").write_bytes(b"built before")
    wheel = "tiny_staged-1.2.3-py3-none-manylinux_2_28_x86_64.whl"
    matrix = hostile(
        checkout,
        f"{STAGED}\nos.makedirs('dist/sub', exist_ok=True)\n"
        f"open('dist/{wheel}', 'w').write('fake')\nopen('dist/sub/x', 'w').write('x')",
    )
    # the cell's log is written into dist/logs/ as the command ends: release's, not the command's
    error = failed_step(matrix, dist / "logs" / "13.0-x86_64.log", dist)
    assert error == (
        "the prepare step `python3 hostile.py` wrote into release's own output (--out): "
        f"dist/sub, dist/{wheel} (removed: stage only into build.prepare's output)"
    )
    assert sorted(p.name for p in dist.iterdir()) == ["earlier.whl", "logs"]
    assert (dist / "earlier.whl").read_bytes() == b"built before"


def test_links_the_command_makes_in_releases_own_scratch_are_never_written_through(
    checkout: Path, tmp_path: Path
) -> None:
    """The cell's staging folder and its log, linked out of the checkout by the command:
    the build would have built, and the log been appended, outside."""
    dist = checkout / "dist"
    (dist / "logs").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "log").write_text("ORIGINAL\n")
    log = dist / "logs" / "13.0-x86_64.log"
    matrix = hostile(
        checkout,
        f"{STAGED}\nos.symlink({str(outside)!r}, 'dist/.13.0-x86_64.staging')\n"
        f"os.symlink({str(outside / 'log')!r}, 'dist/logs/13.0-x86_64.log')",
    )
    error = failed_step(matrix, log, dist)
    # the log's link went as the command's output was logged (proc never follows one)
    assert error == (
        "the prepare step `python3 hostile.py` wrote into release's own output (--out): "
        "dist/.13.0-x86_64.staging (removed: stage only into build.prepare's output)"
    )
    assert (outside / "log").read_text() == "ORIGINAL\n"
    assert sorted(p.name for p in outside.iterdir()) == ["log"]
    assert not (dist / ".13.0-x86_64.staging").exists()
    assert not log.is_symlink()


def test_the_step_is_over_when_the_command_exits_and_what_it_left_running_is_ended(
    checkout: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    hostile(
        checkout,
        f"{STAGED}\nchild = subprocess.Popen(['sleep', '300'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\nprint('script done')",
    )
    matrix = load_matrix(checkout / "matrix.yaml")
    step = step_of(matrix, matrix.cells[0])
    assert step is not None
    start = time.monotonic()
    with prepared(step, "1.2.3", env=environment(), log=tmp_path / "log") as built:
        assert built == checkout / "staged"
    assert time.monotonic() - start < 30
    assert "script done" in (tmp_path / "log").read_text()
    status = Path(f"/proc/{pid_file.read_text()}/status")
    # gone, or a zombie its new parent has yet to reap
    assert not status.exists() or "State:\tZ" in status.read_text()


def test_a_command_past_its_timeout_is_stopped_and_fails_the_cell_naming_the_key(
    checkout: Path, tmp_path: Path
) -> None:
    matrix = hostile(
        checkout, "import time; print('waiting', flush=True); time.sleep(300)", timeout="1"
    )
    start = time.monotonic()
    error = failed_step(matrix, tmp_path / "log")
    assert time.monotonic() - start < 30
    assert error == (
        "the prepare step `python3 hostile.py` did not end within build.prepare.timeout (1 s) "
        "and was stopped: raise the timeout, or find what it waits for in its log"
    )
    assert "waiting" in (tmp_path / "log").read_text()
