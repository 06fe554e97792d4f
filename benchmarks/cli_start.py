"""How much CPU `release` costs before it does anything, measured side by side in one run.

Each command line runs `--rounds` times (default 10), interleaved with the others so that
the machine's noise falls on all of them alike; a run's cost is its CPU time (user +
system, children included), and each figure is the median of its rounds:

- `python -c pass`: the interpreter alone;
- `twine --version`: a packaging tool of the same kind (it loads its own commands);
- `release --version`: goal at most 0.15 s of CPU;
- every command's `--help` (which should cost what `--version` does: a command imports its
  stage only when it runs), as a ratio of `release --version`'s;
- every command's typical run, offline, against stand-ins made here: the shipped
  matrix.yaml, a stand-in dist of its cells (small real wheels, tests/integration/wheels.py),
  the stand-in GitHub and a pypiserver on 127.0.0.1, an empty cache. Where a typical run
  needs what the stand-ins cannot give (a publish record, a GPU runner, a toolchain
  download), the command runs until it refuses, its stage loaded: the table says so;
- `release matrix` on the shipped matrix.yaml: goal at most 2 times `twine --version`.

For each typical run it then lists what it imported (`python -X importtime`, one more run):
the modules of release/ and the heaviest third-party packages, by import time.

Run from the repository root, in the venv the README's set-up makes:
    .venv/bin/python benchmarks/cli_start.py [--rounds 10]
It ends with the lines `release --version: S s of CPU (R x python -c pass)` and
`release matrix / twine --version: R`.
"""

from __future__ import annotations

import argparse
import collections
import http.server
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from release.cli import COMMANDS  # noqa: E402
from tests.github_standin import GitHubStandIn  # noqa: E402
from tests.integration.interface import standin_dist  # noqa: E402
from tests.pypi_server import PypiServer  # noqa: E402
from tests.s3_server import free_port  # noqa: E402

BIN = Path(sys.executable).parent
RELEASE = str(BIN / "release")
REFERENCE = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "twine --version": [str(BIN / "twine"), "--version"],
    "release --version": [RELEASE, "--version"],
    "release --help": [RELEASE, "--help"],
}


@dataclass(frozen=True)
class Typical:
    """A command's typical run: its arguments (`{tmp}`, `{dist}`, `{github}`, `{pypi}`,
    `{served}` filled in), the exit code it ends with, and what it does."""

    args: tuple[str, ...]
    exit_code: int
    what: str


TYPICAL = {
    "init": Typical(
        ("init", "{tmp}/init-csrc", "--offline", "--force", "--json"), 0, "csrc/'s files, written"
    ),
    "matrix": Typical(("matrix",), 0, "the shipped matrix's table"),
    "nccl": Typical(("nccl", "--out", "{tmp}/nccl", "--json"), 0, "the NCCL files, written"),
    "doctor": Typical(("doctor", "--cache-dir", "{tmp}/cache", "--json"), 0, "an empty cache"),
    "build": Typical(
        ("build", "--dry-run", "--cache-dir", "{tmp}/cache", "--json"), 0, "--dry-run"
    ),
    "publish": Typical(
        (
            "publish",
            "--dry-run",
            "--dist",
            "{dist}",
            "--github-api-url",
            "{github}",
            "--repository-url",
            "{pypi}",
            "--index-dir",
            "{tmp}/index",
            "--json",
        ),
        0,
        "--dry-run of the stand-in dist: GitHub and PyPI asked",
    ),
    "verify": Typical(
        ("verify", "--dist", "{dist}", "--no-pip", "--json"), 8, "refused: no published.json"
    ),
    "audit": Typical(
        ("audit", "--no-torch-index", "{served}", "--json"), 0, "one stand-in wheel, served"
    ),
    "plan": Typical(
        (
            "plan",
            "--dist",
            "{dist}",
            "--cache-dir",
            "{tmp}/cache",
            "--github-api-url",
            "{github}",
            "--repository-url",
            "{pypi}",
            "--json",
        ),
        0,
        "the stand-in dist: GitHub and PyPI asked",
    ),
    "pins": Typical(("pins", "--dist", "{dist}", "--json"), 8, "refused: no published.json"),
    "gpu-gate": Typical(
        ("gpu-gate", "--runner", "h100", "--dist", "{dist}", "--json"), 2, "refused: no gpu-gate"
    ),
    "env": Typical(
        ("env", "--cuda", "11.0", "--arch", "x86_64", "--json"), 2, "refused: no such CUDA cell"
    ),
}


def cpu_seconds(command: Sequence[str], env: Mapping[str, str], exit_code: int = 0) -> float:
    """The CPU time (user + system) of one run of `command` and its children."""
    before = os.times()
    done = subprocess.run(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    after = os.times()
    if done.returncode != exit_code:
        tail = done.stderr.decode(errors="replace")[-800:]
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}, not {exit_code}\n{tail}")
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def imports(command: Sequence[str], env: Mapping[str, str]) -> tuple[int, list[tuple[str, float]]]:
    """How many modules of release/ `command` imports, and the third-party packages it
    imports with their import time (seconds, each module's own), heaviest first."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    own = 0
    packages: dict[str, float] = collections.defaultdict(float)
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        took, _, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        top = name.split(".", 1)[0]
        if top == "release":
            own += 1
        elif top not in {*sys.stdlib_module_names, "sitecustomize", "org"} and not top.startswith(
            "_"
        ):
            packages[top] += int(took) / 1e6
    return own, sorted(packages.items(), key=lambda item: -item[1])


def serve(directory: Path) -> str:
    """A static server of `directory` on 127.0.0.1 (a daemon thread): its base URL."""
    handler = partial(_Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def typical_commands(tmp: Path, github: str, pypi: str) -> dict[str, list[str]]:
    dist = tmp / "dist"
    dist.mkdir()
    manifest = standin_dist(dist)
    shutil.copytree(
        REPO / "csrc", tmp / "init-csrc", ignore=shutil.ignore_patterns("build", "__pycache__")
    )
    places = {
        "tmp": str(tmp),
        "dist": str(dist),
        "github": github,
        "pypi": pypi,
        "served": serve(dist) + manifest.wheels[0].filename,
    }
    return {
        name: [RELEASE, *(arg.format(**places) for arg in typical.args)]
        for name, typical in TYPICAL.items()
    }


def environment(standin: GitHubStandIn, pypi: PypiServer) -> dict[str, str]:
    """This environment without CI's, GitHub's or a proxy's settings, with the stand-ins'
    credentials."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "TWINE_", "RELEASE_", "ACTIONS_", "RUNNER_"))
        and k.upper() not in {"CI", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "CUDA_HOME"}
    }
    return {**kept, **pypi.env(), "GITHUB_TOKEN": standin.token, "NO_PROXY": "127.0.0.1"}


def measure(rounds: int, tmp: Path, standin: GitHubStandIn, pypi: PypiServer) -> None:
    env = environment(standin, pypi)
    typical = typical_commands(tmp, standin.api_url, pypi.url)
    runs: dict[str, tuple[list[str], int]] = {
        **{name: (command, 0) for name, command in REFERENCE.items()},
        **{f"{c} --help": ([RELEASE, c, "--help"], 0) for c in COMMANDS},
        **{c: (typical[c], TYPICAL[c].exit_code) for c in COMMANDS},
    }
    for command, code in runs.values():  # warm: byte-compiled modules, the page cache
        cpu_seconds(command, env, code)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, (command, code) in runs.items():
            samples[name].append(cpu_seconds(command, env, code))
    median = {name: statistics.median(values) for name, values in samples.items()}
    version = median["release --version"]
    print(f"median of {rounds} rounds, CPU seconds (user + system)")
    for name in REFERENCE:
        print(f"  {name:20} {median[name]:.3f}")
    print()
    print(f"{'command':10} {'--help':>7} {'/ --version':>11} {'typical':>8}  typical run")
    for c in COMMANDS:
        help_cpu = median[f"{c} --help"]
        print(
            f"{c:10} {help_cpu:7.3f} {help_cpu / version:10.2f}x {median[c]:8.3f}  "
            f"release {c}: {TYPICAL[c].what}"
        )
    print()
    print("what each typical run imports (release/'s modules; the heaviest packages, import s)")
    for c in COMMANDS:
        own, packages = imports(typical[c], env)
        heaviest = ", ".join(f"{p} {s:.3f}" for p, s in packages[:8]) or "none"
        print(f"  {c:10} {own:3} of release/; {heaviest}")
    print()
    python = max(median["python -c pass"], 1e-3)
    print(f"release --version: {version:.3f} s of CPU ({version / python:.1f} x python -c pass)")
    ratio = median["matrix"] / median["twine --version"]
    print(f"release matrix / twine --version: {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="release-cli-start-") as name:
        tmp = Path(name)
        pypi = PypiServer(root=tmp / "pypiserver", port=free_port())
        pypi.start()
        try:
            with GitHubStandIn() as standin:
                standin.add_repo("k3-project/k3-kernels")
                measure(rounds, tmp, standin, pypi)
        finally:
            pypi.stop()


if __name__ == "__main__":
    main()
