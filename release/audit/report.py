"""What one `release audit` found: the summary by rule, each finding, what it could not
check, and its `--json` document with that document's JSON Schema (`release audit
--schema`). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from release.inspection.findings import RULES, Finding

# the rules that need a release to compare with: `release verify`'s only
VERIFY_ONLY = frozenset({"stray-link", "missing-variant"})
AUDIT_RULES = tuple(rule for rule in RULES if rule.id not in VERIFY_ONLY)


@dataclass(frozen=True, kw_only=True)
class Unchecked:
    rule: str
    file: str
    why: str


@dataclass(frozen=True, kw_only=True)
class AuditReport:
    sources: tuple[str, ...]
    pages: tuple[str, ...]  # the project pages read
    files: int  # the wheel URLs listed or given (each read once)
    findings: tuple[Finding, ...]
    checked: Mapping[str, int]  # rule -> files it ran on
    unchecked: tuple[Unchecked, ...] = ()
    not_reached: tuple[str, ...] = ()  # wheel URLs the total time limit left unread
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.findings


def summary_rows(report: AuditReport) -> list[list[str]]:
    """rule, what it checks, files checked, findings: one row per rule of the audit."""
    counts: dict[str, int] = {}
    for one in report.findings:
        counts[one.rule] = counts.get(one.rule, 0) + 1
    return [
        [rule.id, rule.checks, str(report.checked.get(rule.id, 0)), str(counts.get(rule.id, 0))]
        for rule in AUDIT_RULES
    ]


def finding_rows(report: AuditReport) -> list[list[str]]:
    order = {rule.id: n for n, rule in enumerate(RULES)}
    ranked = sorted(report.findings, key=lambda f: (order[f.rule], f.file, f.url, f.detail))
    return [[f.rule, f.file, f.url, f.detail] for f in ranked]


def audit_json(report: AuditReport) -> dict[str, Any]:
    """The `--json` document (release.console adds `schema` and `command`)."""
    rows = summary_rows(report)
    return {
        "ok": report.ok,
        "seconds": round(report.seconds, 3),
        "sources": list(report.sources),
        "pages": list(report.pages),
        "files": report.files,
        "rules": [
            {"rule": rule, "checks": checks, "files_checked": int(n), "findings": int(found)}
            for rule, checks, n, found in rows
        ],
        "findings": [asdict(f) for f in report.findings],
        "unchecked": [asdict(u) for u in report.unchecked],
        "not_reached": list(report.not_reached),
    }


def _strings() -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}}


def _objects(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {
            "type": "object",
            "properties": dict(properties),
            "required": list(properties),
            "additionalProperties": False,
        },
    }


_RULE = {"enum": [rule.id for rule in AUDIT_RULES]}
_TEXT = {"type": "string"}
_COUNT = {"type": "integer", "minimum": 0}


def audit_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `release audit --json`'s document."""
    properties: dict[str, Any] = {
        "schema": {"const": 1},
        "command": {"const": "audit"},
        "ok": {"type": "boolean", "description": "no finding"},
        "seconds": {"type": "number", "minimum": 0},
        "sources": {**_strings(), "description": "the URLs given, fragments left out"},
        "pages": {**_strings(), "description": "the project pages read"},
        "files": {**_COUNT, "description": "the wheel URLs listed or given, each read once"},
        "rules": _objects(
            {"rule": _RULE, "checks": _TEXT, "files_checked": _COUNT, "findings": _COUNT}
        ),
        "findings": _objects({"rule": _RULE, "file": _TEXT, "url": _TEXT, "detail": _TEXT}),
        "unchecked": _objects({"rule": _RULE, "file": _TEXT, "why": _TEXT}),
        "not_reached": {**_strings(), "description": "wheel URLs the --timeout left unread"},
    }
    # a run that ended in an error says it (release.cli): beside the report it had made, or
    # alone where it made none (a URL refused, a page unreachable)
    error = {
        "type": "object",
        "properties": {
            "message": _TEXT,
            "hint": {"type": ["string", "null"], "description": "null where there is none"},
            "exit_code": _COUNT,
        },
        "required": ["message", "hint", "exit_code"],
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "release audit --json",
        "type": "object",
        "properties": {**properties, "error": error},
        "anyOf": [
            {"required": list(properties)},
            {
                "required": ["schema", "command", "ok", "error"],
                "properties": {"ok": {"const": False}},
            },
        ],
        "additionalProperties": False,
    }
