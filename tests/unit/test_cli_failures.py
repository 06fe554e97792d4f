"""How the command line ends when the input or the surroundings are wrong: one line, the
right exit code, no traceback, nothing half-written."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from release.cli import main

REPO = Path(__file__).resolve().parents[2]
MATRIX = str(REPO / "matrix.yaml")


class ClosedPipe(io.StringIO):
    """stdout after the reader went away (`release matrix | head`)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("no descriptor")


def test_a_closed_pipe_ends_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    code = main(["matrix", "--matrix", MATRIX, "--format", "json"])
    assert code == 141
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("jobs", ["0", "-1", "two"])
def test_jobs_must_be_a_positive_number(jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["build", "--matrix", MATRIX, "--jobs", jobs])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--jobs" in err
    assert "Traceback" not in err


def test_an_output_that_is_a_file_is_one_line_with_exit_code_8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    taken = tmp_path / "dist"
    taken.write_text("a file, not a directory")
    code = main(["build", "--matrix", MATRIX, "--out", str(taken)])
    err = capsys.readouterr().err.splitlines()
    assert code == 8
    assert err[0] == f"error: --out {taken}: is a file, not a directory"
    assert taken.read_text() == "a file, not a directory"


def test_an_output_below_a_file_is_one_line_with_exit_code_8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    (tmp_path / "file").write_text("")
    code = main(["build", "--matrix", MATRIX, "--out", str(tmp_path / "file" / "dist")])
    err = capsys.readouterr().err.splitlines()
    assert code == 8
    assert err[0].startswith("error: cannot create --out ")
    assert "Not a directory" in err[0]


def test_a_bad_source_date_epoch_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "last tuesday")
    code = main(["build", "--matrix", MATRIX, "--dry-run"])
    assert code == 2
    assert "SOURCE_DATE_EPOCH='last tuesday' is not a whole number" in capsys.readouterr().err
