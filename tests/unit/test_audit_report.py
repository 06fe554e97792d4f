"""What one `release audit` found, as a summary by rule and as its --json document, which its
own JSON Schema accepts."""

from __future__ import annotations

import jsonschema
import pytest

from release.audit.report import (
    AUDIT_RULES,
    AuditReport,
    Unchecked,
    audit_json,
    audit_schema,
    summary_rows,
)
from release.inspection.findings import Finding

REPORT = AuditReport(
    sources=("http://idx.test/k3-kernels/",),
    pages=("http://idx.test/k3-kernels/",),
    files=3,
    findings=(
        Finding(rule="manylinux", file="a.whl", url="http://idx.test/a.whl", detail="needs X"),
        Finding(rule="manylinux", file="b.whl", url="http://idx.test/b.whl", detail="needs Y"),
        Finding(rule="duplicate", file="a.whl", url="http://idx.test/k3-kernels/", detail="twice"),
    ),
    checked={"manylinux": 3, "duplicate": 4, "download": 4},
    unchecked=(Unchecked(rule="torch", file="c.whl", why="no torch index to ask"),),
    seconds=1.25,
)


def test_the_summary_has_a_row_per_rule_with_files_checked_and_findings() -> None:
    rows = {row[0]: row for row in summary_rows(REPORT)}
    assert list(rows) == [rule.id for rule in AUDIT_RULES]
    assert "stray-link" not in rows  # verify's: it needs the release
    assert rows["manylinux"][2:] == ["3", "2"]
    assert rows["duplicate"][2:] == ["4", "1"]
    assert rows["torch"][2:] == ["0", "0"]


def test_the_json_document_keeps_its_schema() -> None:
    document = {"schema": 1, "command": "audit", **audit_json(REPORT)}
    jsonschema.validate(document, audit_schema())
    assert document["ok"] is False
    assert document["unchecked"] == [
        {"rule": "torch", "file": "c.whl", "why": "no torch index to ask"}
    ]
    document["findings"][0]["rule"] = "no-such-rule"
    with pytest.raises(jsonschema.ValidationError):  # a rule that does not exist
        jsonschema.validate(document, audit_schema())


def test_an_error_document_with_or_without_a_hint_keeps_the_schema() -> None:
    # a usage error has no hint: `"hint": null` failed the schema that said "a string"
    for hint in (None, "give an index or wheel URL"):
        error = {"message": "argument --timeout: ...", "hint": hint, "exit_code": 2}
        jsonschema.validate(
            {"schema": 1, "command": "audit", "ok": False, "error": error}, audit_schema()
        )
