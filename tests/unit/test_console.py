"""Output from one place: GitHub Actions workflow commands (escaped, with file, line and
column), one JSON document per command, tables that fit 80 columns, colour switches."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from release.cli import main
from release.console import Annotation, Output, make_console

REPO = Path(__file__).resolve().parents[2]
MATRIX = str(REPO / "matrix.yaml")
BAD = REPO / "tests" / "data" / "matrix" / "bad"
COMMAND = re.compile(r"^::(?P<level>\w+)(?: (?P<props>[^:]*))?::(?P<data>.*)$")


def unescape(text: str, *, prop: bool = False) -> str:
    """The runner's side of the workflow-command escaping."""
    if prop:
        text = text.replace("%3A", ":").replace("%2C", ",")
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def parse(line: str) -> tuple[str, dict[str, str], str]:
    match = COMMAND.match(line)
    assert match is not None, line
    props = {}
    for item in (match["props"] or "").split(","):
        if item:
            key, _, value = item.partition("=")
            props[key] = unescape(value, prop=True)
    return match["level"], props, unescape(match["data"])


def test_a_message_with_newlines_and_percent_survives_escaping() -> None:
    message = "100% of 2 lines\nsecond: line, with a colon\r"
    line = Annotation(message=message, file="a,b:c.yaml", line=3, col=4, title="t: x").command()
    assert "\n" not in line
    level, props, data = parse(line)
    assert (level, data) == ("error", message)
    assert props == {"file": "a,b:c.yaml", "line": "3", "col": "4", "title": "t: x"}


def test_a_bad_matrix_in_actions_is_annotated_at_its_line_and_column(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    path = BAD / "destinations.yaml"
    assert main(["matrix", "--matrix", str(path)]) == 2
    commands = [parse(ln) for ln in capsys.readouterr().err.splitlines() if ln.startswith("::")]
    errors = [(props, data) for level, props, data in commands if level == "error"]
    assert len(errors) == 2
    positions = {(p["line"], p["col"]) for p, _ in errors}
    assert positions == {("6", "25"), ("9", "34")}
    for props, data in errors:
        assert props["file"] == str(path)
        assert props["title"] == "release matrix"
        assert data.startswith(f"destinations.yaml:{props['line']}:{props['col']}: ")


def test_outside_actions_there_are_no_workflow_commands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert main(["matrix", "--matrix", str(BAD / "destinations.yaml")]) == 2
    assert "::" not in capsys.readouterr().err


def test_secrets_are_masked_at_the_start_in_actions(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_maskMe12345")
    monkeypatch.setenv("TWINE_PASSWORD", "pw-maskMe-678")
    assert main(["matrix", "--matrix", MATRIX]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "::add-mask::ghs_maskMe12345" in err[:2]
    assert "::add-mask::pw-maskMe-678" in err[:2]


def test_a_group_folds_in_actions(tmp_path: Path) -> None:
    stderr = io.StringIO()
    output = Output({"GITHUB_ACTIONS": "true"}, stderr=stderr, stdout=io.StringIO())
    with output.group("13.0-x86_64: build log"):
        output.note("inside")
    assert stderr.getvalue().splitlines() == [
        "::group::13.0-x86_64: build log",
        "inside",
        "::endgroup::",
    ]


def test_a_control_character_from_outside_is_shown_as_its_escape() -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    output = Output({}, stderr=stderr, stdout=stdout)
    name = "k3-1.0-\x1b[31mRED\x1b]0;TITLE\x07\r-py3-none-any.whl"
    output.note(f"archive {name}: not a valid wheel filename")
    output.line(f"file: {name}")
    shown = "k3-1.0-\\x1b[31mRED\\x1b]0;TITLE\\x07\\r-py3-none-any.whl"
    assert stderr.getvalue() == f"archive {shown}: not a valid wheel filename\n"
    assert shown in stdout.getvalue()
    assert "\x1b" not in stdout.getvalue() + stderr.getvalue()
    assert output.shown("two\nlines\tand a tab") == "two\nlines\tand a tab"


def test_the_step_summary_is_appended(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier\n")
    Output({"GITHUB_STEP_SUMMARY": str(summary)}).summary("## now")
    assert summary.read_text() == "earlier\n## now\n"


DOCUMENTS = {
    "matrix": (["matrix", "--matrix", MATRIX], {"project", "version", "cells"}),
    "doctor": (["doctor", "--matrix", MATRIX], {"cache", "toolchains", "backends", "settings"}),
    "build": (["build", "--matrix", MATRIX, "--dry-run"], {"dry_run", "cells", "settings"}),
}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_json_is_one_document_on_stdout_with_its_schema(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    args, keys = DOCUMENTS[name]
    assert main([*args, "--cache-dir", str(tmp_path)] if name != "matrix" else args) == 0
    capsys.readouterr()
    extra = ["--cache-dir", str(tmp_path)] if name != "matrix" else []
    assert main([*args, *extra, "--json", "--json-file", str(tmp_path / "doc.json")]) == 0
    out = capsys.readouterr().out
    document = json.loads(out)
    assert document["schema"] == 1
    assert document["command"] == name
    assert keys <= set(document)
    assert json.loads((tmp_path / "doc.json").read_text()) == document


def test_nccl_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nccl", "--matrix", MATRIX, "--out", str(tmp_path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["command"] == "nccl"
    assert {Path(f["path"]).name for f in document["files"]} == {p.name for p in tmp_path.iterdir()}


@pytest.mark.parametrize("command", ["doctor", "matrix"])
def test_tables_fit_80_columns(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # doctor shows it; no git here
    assert main([command, "--matrix", MATRIX]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 8
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)


def test_wide_terminals_get_a_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    assert main(["matrix", "--matrix", MATRIX]) == 0
    out = capsys.readouterr().out
    assert "┃ CUDA" in out
    assert max(len(line) for line in out.splitlines()) <= 240


def test_colour_follows_no_color_and_force_color() -> None:
    red = "\x1b[31m"
    forced = io.StringIO()
    make_console(forced, {"FORCE_COLOR": "1"}).print("[red]x[/red]")
    assert red in forced.getvalue()
    no_color = io.StringIO()
    make_console(no_color, {"FORCE_COLOR": "1", "NO_COLOR": "1"}).print("[red]x[/red]")
    assert red not in no_color.getvalue()
    piped = io.StringIO()
    make_console(piped, {}).print("[red]x[/red]")
    assert "\x1b[" not in piped.getvalue()


SECRET = "S3cr3t-Val-0042"
URL = f"https://user:{SECRET}@index.example/simple/?token={SECRET}"


@pytest.mark.parametrize("columns", ["60", "200"])  # stacked, and a table
def test_nothing_the_console_shows_or_writes_carries_a_secret(columns: str, tmp_path: Path) -> None:
    """The last line of defence (issue 49): whatever a command hands the console, the
    credentials of a URL and the environment's secret values come out as ***: lines,
    notes, warnings, tables (before rich folds a long value), annotations, the step
    summary, a --markdown file and the --json document."""
    summary = tmp_path / "summary.md"
    environ = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
               "MY_TOKEN": "env-token-4711", "COLUMNS": columns}  # fmt: skip
    stdout, stderr = io.StringIO(), io.StringIO()
    output = Output(
        environ, json_mode=True, json_file=tmp_path / "doc.json", command="verify",
        stdout=stdout, stderr=stderr,
    )  # fmt: skip
    both = f"{URL} env-token-4711"
    output.line(both)
    output.note(both)
    output.warning(both, title="t")
    output.table(["check", "URL"], [["pip", URL + "x" * 80], ["download", both]], both)
    output.annotate(Annotation(message=both, title="release verify"))
    output.summary(both)
    output.write_file(tmp_path / "report.md", both)
    output.document({"checks": [{"url": URL, "detail": both}], both: [both]})
    output.finish(None)
    shown = stdout.getvalue() + stderr.getvalue()
    written = "".join(p.read_text() for p in tmp_path.iterdir())
    for text in (shown, written):
        assert SECRET not in text
        assert "env-token-4711" not in text
    document = json.loads(stdout.getvalue())
    assert document["checks"] == [
        {"url": "https://***@index.example/simple/?token=***",
         "detail": "https://***@index.example/simple/?token=*** ***"},
    ]  # fmt: skip


def test_a_document_is_written_once_when_the_command_ends(tmp_path: Path) -> None:
    stdout = io.StringIO()
    output = Output({}, json_mode=True, json_file=tmp_path / "d.json", stdout=stdout)
    output.document({"cells": []})
    assert stdout.getvalue() == ""
    assert not (tmp_path / "d.json").exists()
    with pytest.raises(RuntimeError):
        output.document({"cells": []})
    output.finish(None)
    assert json.loads(stdout.getvalue()) == {"schema": 1, "command": "", "cells": []}
    assert json.loads((tmp_path / "d.json").read_text()) == json.loads(stdout.getvalue())
