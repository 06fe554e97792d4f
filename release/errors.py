"""The one error family: every error a user can cause, with its exit code and a hint.

The CLI catches `ReleaseError` once, prints `error: <message>` and, when there is one,
`hint: <hint>`, and exits with the class's `exit_code`. Anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from release.credentials import redact


@dataclass(frozen=True)
class Location:
    """Where in a file a problem is (for annotations in CI): 1-based line and column."""

    file: str
    line: int | None
    column: int | None
    message: str


class ReleaseError(Exception):
    """A problem the user can fix. `message` is one line; `hint` says how to fix it;
    `locations` say where in which file, when that is known. No credential of a URL is
    ever part of one: its texts are redacted as it is made."""

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        locations: Sequence[Location] = (),
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.hint = redact(hint) if hint is not None else None
        self.locations = tuple(
            Location(where.file, where.line, where.column, redact(where.message))
            for where in locations
        )

    def lines(self) -> list[str]:
        out = [f"error: {line}" for line in self.message.splitlines() or [""]]
        if self.hint:
            out.append(f"hint: {self.hint}")
        return out


MAX_SHOWN_PROBLEMS = 50
SHOWN_CHARS = 40  # a user's value quoted in a message is cut to this


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """`repr(value)`, cut to `limit` characters: messages never carry an unbounded value,
    nor the credentials of a URL (redacted before the cut, which could leave half of one)."""
    text = redact(repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


SHOWN_PATH_CHARS = 200  # a path quoted in a message is whole up to this (a cut path names
# nothing), then cut: a value of 100,000 characters was echoed whole


def as_given(text: str) -> str:
    """A value the user typed (an option's), as a message quotes it: as typed when short
    and printable, else `shown` (escaped on one line, cut to SHOWN_CHARS)."""
    return text if text.isprintable() and len(text) <= SHOWN_CHARS else shown(text)


def path_as_given(text: str) -> str:
    """A path the user typed, as a message quotes it: as typed when printable and no
    longer than SHOWN_PATH_CHARS, else `shown` to that length."""
    if text.isprintable() and len(text) <= SHOWN_PATH_CHARS:
        return text
    return shown(text, SHOWN_PATH_CHARS)


def one_line(text: str) -> str:
    """`text` with each character that is not printable escaped (`\\n`): a name a server
    lists (`x-1.0-py3-none-any&#10;.whl`), a server's error code or a reader's message stays
    on its line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class ConfigError(ReleaseError):
    """matrix.yaml (or a command-line option) is invalid. Carries every problem found;
    prints the first MAX_SHOWN_PROBLEMS of them."""

    exit_code = 2

    def __init__(
        self,
        problems: Sequence[str],
        *,
        hint: str | None = None,
        locations: Sequence[Location] = (),
    ) -> None:
        # a problem found once for each place a shared value is used (a default's SM, checked
        # for every CUDA version) is one problem
        # each problem is one line of its own, whatever value it quotes (`--cuda $'12.9\n'`)
        self.problems = tuple(dict.fromkeys(one_line(redact(problem)) for problem in problems))
        shown = list(self.problems[:MAX_SHOWN_PROBLEMS])
        if len(self.problems) > MAX_SHOWN_PROBLEMS:
            shown.append(f"... and {len(self.problems) - MAX_SHOWN_PROBLEMS} more problems")
        located = tuple(dict.fromkeys(locations))
        super().__init__("\n".join(shown), hint=hint, locations=located[:MAX_SHOWN_PROBLEMS])


class ToolchainError(ReleaseError):
    """A compiler or tool a cell needs is missing, or reports the wrong version."""

    exit_code = 3


class BuildError(ReleaseError):
    """A cell failed to build, or its wheel failed inspection."""

    exit_code = 4


class PublishError(ReleaseError):
    """A destination refused a file, or could not be reached within the retry budget."""

    exit_code = 5


class ConflictError(PublishError):
    """A destination already holds a file of that name with other bytes."""

    exit_code = 6


class VerifyError(ReleaseError):
    """A published URL does not resolve to the exact bytes that were built."""

    exit_code = 7


class FileError(ReleaseError):
    """A file or directory the command reads or writes cannot be used (missing, read-only,
    not a directory, disk full)."""

    exit_code = 8

    @classmethod
    def of(cls, error: OSError, what: str = "") -> FileError:
        """One line from an OSError: the path, what was being done, and why."""
        path = error.filename if error.filename is not None else "?"
        reason = error.strerror or type(error).__name__
        doing = f"cannot {what} " if what else ""
        return cls(
            f"{doing}{path}: {reason}",
            hint="check the path exists, is of the right kind and is writable",
        )


class IncompleteError(ReleaseError):
    """A read-only command could not ask every destination (no credentials, unreachable):
    everything known locally was shown, what was not asked is named."""

    exit_code = 9
