"""An abi3 wheel keeps to the limited API of its floor: abi3audit reads every shared object
of the wheel and lists the CPython symbols outside the limited API, and those that joined
it after the floor (the matrix's `abi3:`, which is the wheel's cpXY tag).

abi3audit's Python API is private (`abi3audit._audit`, `_object`, ...), so it runs as the
tool it is (`python -m abi3audit --report`), on a local wheel file: it needs no network.

Pure: `audit_command`, `limited_api_problems` (its JSON report). Edge: `limited_api_auditor`
runs it on a copy of the wheel through release.proc.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from packaging.version import Version

from release import proc
from release.fsutil import json_document

LimitedApiAudit = Callable[[str, bytes], list[str]]
"""(the wheel's filename, its bytes) -> its limited-API problems."""

LISTED_PER_OBJECT = 5


def audit_command(python: str, wheel: Path, floor: str) -> list[str]:
    return [python, "-m", "abi3audit", "--report", "--assume-minimum-abi3", floor, str(wheel)]


def _after(added: str, floor: str) -> bool:
    try:
        return Version(added) > Version(floor)
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
        return True


def limited_api_problems(report: str, floor: str) -> list[str]:
    """The problems abi3audit's `--report` JSON names, one line each (at most
    LISTED_PER_OBJECT symbols per shared object and kind): a symbol outside the limited
    API, or one the limited API gained after `floor` ("3.10"), with the version."""
    try:
        specs = json_document(report, "abi3audit's report")["specs"]
        objects = [item for spec in specs.values() for item in spec.get("wheel", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        return [f"abi3audit gave no report: {proc.one_line_tail(report)}"]
    problems: list[str] = []
    for item in objects:
        name = str(item.get("name", "?"))
        result = item.get("result", {})
        outside = sorted(str(s) for s in result.get("non_abi3_symbols", []))
        later = sorted(
            (str(s), str(v))
            for s, v in dict(result.get("future_abi3_objects", {})).items()
            if _after(str(v), floor)
        )
        problems += capped(
            name,
            [
                f"{symbol} is not in the limited API: an abi3 wheel may use only it (build "
                "without it, or build one wheel per Python: python: instead of abi3:)"
                for symbol in outside
            ],
            "more outside it",
        )
        problems += capped(
            name,
            [
                f"{symbol} joined the limited API in Python {added}, after the cell's abi3 "
                f'floor {floor} (raise it: abi3: "{added}", or build without it)'
                for symbol, added in later
            ],
            f"more after {floor}",
        )
    return problems


def capped(name: str, lines: Sequence[str], more: str) -> list[str]:
    """A problem line of the shared object `name` each, the first LISTED_PER_OBJECT of
    them, then how many `more` there are."""
    shown = [f"{name}: {line}" for line in lines[:LISTED_PER_OBJECT]]
    rest = len(lines) - LISTED_PER_OBJECT
    return [*shown, f"{name}: and {rest} {more}"] if rest > 0 else shown


def limited_api_auditor(
    python: str, floor: str, env: Mapping[str, str], runner: proc.Runner = proc.run
) -> LimitedApiAudit:
    """A `LimitedApiAudit` that runs abi3audit (beside this tool, in `python`) on a copy of
    each wheel, under its own name: abi3audit reads the cpXY-abi3 tag from it."""

    def audit(filename: str, data: bytes) -> list[str]:
        with tempfile.TemporaryDirectory(prefix="release-abi3-") as tmp:
            wheel = Path(tmp) / Path(filename).name
            wheel.write_bytes(data)
            done = runner(audit_command(python, wheel, floor), env=env, separate_stderr=True)
        if done.returncode not in (0, 1) or not done.output.strip():  # 1: it found some
            return [proc.failure("abi3audit", done)]
        if (too_long := proc.too_long("abi3audit", done)) is not None:
            return [too_long]
        return limited_api_problems(done.output, floor)

    return audit
