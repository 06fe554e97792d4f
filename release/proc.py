"""The one way this program runs a subprocess: logged, secrets masked, failures as user
errors carrying the tail of the log and the command that reproduces them."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MASK = "***"
SECRET_NAMES = ("TOKEN", "PASSWORD", "API_KEY", "SECRET")


@dataclass(frozen=True, kw_only=True)
class Completed:
    returncode: int
    output: str
    seconds: float
    log: Path | None


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """Values of variables whose names say they are secrets (GITHUB_TOKEN, TWINE_PASSWORD)."""
    return tuple(
        value
        for name, value in env.items()
        if value and len(value) >= 4 and any(part in name.upper() for part in SECRET_NAMES)
    )


def mask(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret:
            text = text.replace(secret, MASK)
    return text


def tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def reproduce_command(cmd: Sequence[str], env: Mapping[str, str], cwd: Path | None) -> str:
    """A shell line that re-runs `cmd` with the variables that differ from the parent's."""
    changed = {k: v for k, v in env.items() if os.environ.get(k) != v and not k.startswith("_")}
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(changed.items()))
    where = f"cd {shlex.quote(str(cwd))} && " if cwd else ""
    return mask(f"{where}{prefix} {shlex.join(cmd)}".strip(), secret_values(env))


def run(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str],
    log: Path | None = None,
    cwd: Path | None = None,
) -> Completed:
    """Run `cmd`, capturing stdout and stderr together; append both (masked) to `log`."""
    secrets = secret_values(env)
    start = time.monotonic()
    proc = subprocess.run(
        list(cmd),
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        check=False,
    )
    seconds = time.monotonic() - start
    output = mask(proc.stdout or "", secrets)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as handle:
            handle.write(f"$ {mask(shlex.join(cmd), secrets)}\n{output}\n")
            handle.write(f"[exit {proc.returncode} after {seconds:.1f} s]\n")
    return Completed(returncode=proc.returncode, output=output, seconds=seconds, log=log)
