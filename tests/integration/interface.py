"""Every command's interface, recorded: exit code and `--json` document per invocation.

The real `release` console script runs as a subprocess in the repository root, on the
shipped matrix.yaml and csrc/, for every command of docs/commands.md's table, its
`--help` and its error exits. What it prints (after `normalise`) is compared with a golden
file under tests/data/interface/, one per invocation, named after it: the exit code, the
`--json` document (as parsed objects, the top-level keys in order, and every nested key in
order) or the exact text of a non-JSON output, and the `error:` / `hint:` lines of stderr.

Two tiers run them (docs/testing.md):

- `fast` (tests/integration/test_interface.py): every invocation that needs no compiler
  run and no toolchain download. The commands that read a dist/ read a stand-in one: small
  real wheels named as the shipped matrix's cells, with a manifest and the NCCL files
  (`standin_dist`); doctor and `build --dry-run` see an empty cache.
- `full` (tests/integration/test_interface_unchanged.py): the real build of the four
  cells, `--compare`, and what reads its dist/ and the toolchains it provisioned. The
  build is the session's `shipped_build` (tests/full/shared_builds.py), which the
  other full-tier tests read too.

The golden files were recorded from the code as it was before a restructuring, so that a
refactored tree can prove it behaves the same. `RECORD_GOLDEN=1` (re)writes them instead of
comparing; without it a missing golden file fails the test.

Offline and deterministic: SOURCE_DATE_EPOCH is fixed (so the sha256 of every wheel is
part of the record), no credentials are passed, GitHub and PyPI are "asked" at a port of
127.0.0.1 that nothing listens on, and every proxy variable points there too, so that no
request leaves the machine. Only the full tier's build may reach PyPI, for the toolchains a
cold cache lacks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from release.matrix import load_matrix
from release.records.manifest import Manifest, write_manifest
from tests.integration.wheels import standin_entry

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "data" / "interface"
RELEASE = Path(sys.executable).with_name("release")
EPOCH = "1700000000"
RECORDING = os.environ.get("RECORD_GOLDEN") == "1"

# Placeholders, in the arguments of an invocation as in its normalised output.
TMP = "<tmp>"  # this module's temporary directory
CACHE = "<cache>"  # the session's toolchain cache (the `release_cache` fixture)
ROOT = "<root>"  # the repository root, where every command runs
PYTHON = "<python>"  # the venv's interpreter, as the console script runs it
UNREACHABLE = "<unreachable>"  # http://127.0.0.1:PORT, a bound port nothing listens on
SECONDS = "<seconds>"
CPUS = "<cpu_count>"

TIMING_KEYS = frozenset({"seconds"})  # wall-clock fields of the documents: zeroed
MEASURED_KEYS = frozenset({"bytes", "entries"})  # what the cache holds on this disk: zeroed
# wall-clock time inside a message: "gave up at the retry limit after 5 attempts in 15 s"
ELAPSED = re.compile(r"(\battempts? in )\d+(?:\.\d+)? s\b")
PARALLEL_KEYS = frozenset({"RELEASE_JOBS"})  # os.cpu_count() // --jobs: the machine's
DIAGNOSTICS = ("error:", "hint:")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
# what would change the commands' behaviour from outside: credentials, CI mode, a
# toolkit, another cache, a date, terminal settings; the test sets its own
DROPPED_PREFIXES = ("GITHUB_", "TWINE_", "ACTIONS_", "RUNNER_", "RELEASE_")
DROPPED = frozenset(
    {"CI", "CUDA_HOME", "SOURCE_DATE_EPOCH", "COLUMNS", "NO_COLOR", "FORCE_COLOR", "NO_PROXY"}
)
COMMANDS = (
    "init", "matrix", "nccl", "doctor", "build", "publish", "verify", "audit", "plan", "pins",
    "gpu-gate", "env",
)  # fmt: skip

Tier = Literal["fast", "full"]


@dataclass(frozen=True)
class Invocation:
    """One `release` command line. `args` may hold the placeholders above."""

    name: str  # the golden file: tests/data/interface/<name>.json
    args: tuple[str, ...]
    tier: Tier = "fast"
    stdout: Literal["json", "text"] = "json"
    after: tuple[str, ...] = ()  # invocations that must have run first (their outputs)
    network: bool = False  # may reach PyPI (toolchain downloads into a cold cache)


BUILD = ("build", "--json", "--out", f"{TMP}/dist", "--cache-dir", f"{TMP}/cache")
UNREACHABLE_APIS = ("--github-api-url", UNREACHABLE, "--repository-url", f"{UNREACHABLE}/legacy/")

HELP = (
    Invocation("help", ("--help",), stdout="text"),
    Invocation("version", ("--version",), stdout="text"),
    *(Invocation(f"help-{c}", (c, "--help"), stdout="text") for c in COMMANDS),
)

INVOCATIONS = (
    *HELP,
    # init: on a copy of csrc/ (asks no index: no torch), and where a matrix.yaml is
    Invocation("init-csrc-json", ("init", f"{TMP}/init-csrc", "--json")),
    Invocation("init-existing", ("init", f"{TMP}/gate", "--json")),
    # matrix
    Invocation("matrix-json", ("matrix", "--json")),
    Invocation("matrix-format-json", ("matrix", "--format", "json")),
    Invocation("matrix-format-github", ("matrix", "--format", "github"), stdout="text"),
    Invocation(
        "matrix-format-github-per-cuda",
        ("matrix", "--format", "github", "--per", "cuda"),
        stdout="text",
    ),
    Invocation("matrix-format-gpu", ("matrix", "--format", "gpu"), stdout="text"),
    Invocation(
        "matrix-format-gpu-with-gate",
        ("matrix", "--matrix", f"{TMP}/gate/matrix.yaml", "--format", "gpu"),
        stdout="text",
    ),
    Invocation(
        "matrix-cuda-12.9-arch-aarch64", ("matrix", "--cuda", "12.9", "--arch", "aarch64", "--json")
    ),
    Invocation("matrix-schema", ("matrix", "--schema"), stdout="text"),
    Invocation("matrix-unknown-key", ("matrix", "--matrix", f"{TMP}/bad/matrix.yaml", "--json")),
    Invocation("matrix-unknown-cuda", ("matrix", "--cuda", "11.0", "--json")),
    # doctor: an empty cache (fast), the cache the build provisioned (full)
    Invocation("doctor-cold-json", ("doctor", "--json")),
    Invocation(
        "doctor-cold-cuda-12.9-arch-aarch64",
        ("doctor", "--cuda", "12.9", "--arch", "aarch64", "--json"),
    ),
    Invocation("doctor-json", ("doctor", "--json"), tier="full", after=("build",)),
    Invocation(
        "doctor-cuda-12.9-arch-aarch64",
        ("doctor", "--cuda", "12.9", "--arch", "aarch64", "--json"),
        tier="full",
        after=("build",),
    ),
    # nccl
    Invocation("nccl-json", ("nccl", "--out", f"{TMP}/nccl", "--json")),
    Invocation("nccl-cuda-12.9", ("nccl", "--cuda", "12.9", "--out", f"{TMP}/nccl-12.9", "--json")),
    # build
    Invocation("build-dry-run-cold", ("build", "--dry-run", "--json")),
    Invocation("build-dry-run", ("build", "--dry-run", "--json"), tier="full", after=("build",)),
    Invocation("build-dry-run-unknown-cuda", ("build", "--dry-run", "--cuda", "11.0", "--json")),
    Invocation("build", BUILD, tier="full", network=True),
    Invocation(
        "build-compare",
        (
            "build",
            "--compare",
            f"{TMP}/dist/manifest.json",
            "--json",
            "--out",
            f"{TMP}/dist2",
            "--cache-dir",
            f"{TMP}/cache",
        ),
        tier="full",
        after=("build",),
    ),
    Invocation(
        "build-compare-missing-manifest",
        ("build", "--compare", f"{TMP}/nosuch/manifest.json", "--json", "--out", f"{TMP}/dist3"),
    ),
    # env
    Invocation(
        "env-13.0-x86_64",
        ("env", "--cuda", "13.0", "--arch", "x86_64", "--json"),
        tier="full",
        after=("build",),
    ),
    Invocation(
        "env-12.9-aarch64",
        ("env", "--cuda", "12.9", "--arch", "aarch64", "--json"),
        tier="full",
        after=("build",),
    ),
    Invocation("env-unknown-cuda", ("env", "--cuda", "11.0", "--arch", "x86_64", "--json")),
    # gpu-gate
    Invocation("gpu-gate-no-gate", ("gpu-gate", "--runner", "nosuch", "--json")),
    Invocation(
        "gpu-gate-unknown-runner",
        (
            "gpu-gate",
            "--matrix",
            f"{TMP}/gate/matrix.yaml",
            "--runner",
            "nosuch",
            "--dist",
            f"{TMP}/dist",
            "--json",
        ),
    ),
    # plan, publish: no credentials, the destinations unreachable -> "not asked", exit 9
    Invocation(
        "plan-standin-unreachable", ("plan", "--dist", f"{TMP}/dist", "--json", *UNREACHABLE_APIS)
    ),
    Invocation(
        "plan-unreachable",
        ("plan", "--dist", f"{TMP}/dist", "--json", *UNREACHABLE_APIS),
        tier="full",
        after=("build",),
    ),
    Invocation(
        "publish-dry-run-standin-unreachable",
        ("publish", "--dist", f"{TMP}/dist", "--dry-run", "--json", *UNREACHABLE_APIS),
    ),
    Invocation(
        "publish-dry-run-unreachable",
        ("publish", "--dist", f"{TMP}/dist", "--dry-run", "--json", *UNREACHABLE_APIS),
        tier="full",
        after=("build",),
    ),
    # the nightly channel: a release's dist is not a nightly; the channel out of reach
    Invocation(
        "publish-channel-nightly-release-dist",
        ("publish", "--channel", "nightly", "--dist", f"{TMP}/dist", "--dry-run", "--json"),
    ),
    Invocation("verify-channel-nightly-unreachable", ("verify", "--channel", "nightly", "--json")),
    # verify, pins: nothing was published
    Invocation("verify-no-record", ("verify", "--dist", f"{TMP}/dist", "--json")),
    Invocation(
        "verify-tag-unreachable",
        ("verify", "--tag", "k3-kernels-v0.1.0", "--json", "--github-api-url", UNREACHABLE),
    ),
    # audit: its document's schema, an index out of reach (exit 7), a line that is no URL
    Invocation("audit-schema", ("audit", "--schema"), stdout="text"),
    Invocation(
        "audit-unreachable",
        ("audit", f"{UNREACHABLE}/simple/k3-kernels/", "--attempts", "1", "--json"),
    ),
    Invocation("audit-not-a-url", ("audit", "ftp://example.invalid/k3_kernels.whl", "--json")),
    Invocation("pins-no-record", ("pins", "--dist", f"{TMP}/dist", "--json")),
    Invocation("pins-no-dist", ("pins", "--dist", f"{TMP}/nodist", "--json")),
)
BY_NAME = {i.name: i for i in INVOCATIONS}


def of_tier(tier: Tier) -> tuple[Invocation, ...]:
    return tuple(i for i in INVOCATIONS if i.tier == tier)


@dataclass(frozen=True)
class Placeholders:
    """What `normalise` replaces: real text -> placeholder, and the venv's bin/ directory."""

    paths: dict[str, str]
    python_bin: str


def normalise(value: Any, places: Placeholders, *, key: str | None = None) -> Any:
    """What a command printed, without what differs between runs and machines.

    - the venv's interpreter under any of its names (`python`, `python3`, `python3.11`)
      becomes `<python>`;
    - every path and URL of `places.paths` (the temporary directory, the cache, the
      repository root, each as given and resolved; the unreachable API URL) becomes its
      placeholder, in every string, the longest first;
    - timing: a `seconds` field (anywhere) becomes 0, and the wall-clock time of a retry
      message ("after 5 attempts in 15 s") becomes `<seconds>`; a `bytes` or `entries`
      field (what a part of the cache holds on this disk) becomes 0;
    - a `RELEASE_JOBS` value equal to this machine's CPU count becomes `<cpu_count>`
      (another value is kept: it would be a change).

    Everything else is kept as printed: sha256 values, filenames, sizes, tool versions, the
    order of lists and of keys (dicts are rebuilt in their order).
    """
    if isinstance(value, dict):
        return {k: normalise(v, places, key=k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, places) for v in value]
    if (
        key in TIMING_KEYS | MEASURED_KEYS
        and isinstance(value, int | float)
        and not isinstance(value, bool)
    ):
        return 0
    if key in PARALLEL_KEYS and value == str(os.cpu_count()):
        return CPUS
    if not isinstance(value, str):
        return value
    interpreter = re.escape(places.python_bin) + r"/python(?:\d+(?:\.\d+)*)?(?![\w.])"
    text = re.sub(interpreter, PYTHON, value)
    for real in sorted(places.paths, key=len, reverse=True):
        text = text.replace(real, places.paths[real])
    return ELAPSED.sub(rf"\g<1>{SECONDS} s", text)


def ordered(value: Any) -> Any:
    """`value` with every dict as a list of (key, value) pairs: equal only in the same order."""
    if isinstance(value, dict):
        return [[k, ordered(v)] for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return value


@dataclass
class Workspace:
    """The module's temporary tree, the cache, the unreachable port, and the results."""

    tmp: Path
    cache: Path
    unreachable: str
    results: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def placeholders(self) -> Placeholders:
        paths = {self.unreachable: UNREACHABLE}
        for real, placeholder in ((self.tmp, TMP), (self.cache, CACHE), (REPO, ROOT)):
            paths[str(real)] = placeholder
            paths[str(real.resolve())] = placeholder
        return Placeholders(paths=paths, python_bin=str(RELEASE.parent))

    def expand(self, arg: str) -> str:
        for placeholder, real in (
            (TMP, str(self.tmp)),
            (CACHE, str(self.cache)),
            (ROOT, str(REPO)),
            (UNREACHABLE, self.unreachable),
        ):
            arg = arg.replace(placeholder, real)
        return arg

    def environment(self, invocation: Invocation) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(DROPPED_PREFIXES)
            and k not in DROPPED
            and k.upper() not in PROXY_VARIABLES
        }
        env.update(
            SOURCE_DATE_EPOCH=EPOCH,
            RELEASE_CACHE_DIR=str(self.cache),
            NO_COLOR="1",
            COLUMNS="120",
        )
        if not invocation.network:
            for name in PROXY_VARIABLES:
                env[name] = env[name.lower()] = self.unreachable
            env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        return env

    def execute(self, invocation: Invocation) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(RELEASE), *(self.expand(a) for a in invocation.args)],
            cwd=REPO,
            env=self.environment(invocation),
            umask=0o022,  # the modes of what it writes, whoever runs the suite
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )

    def run(self, name: str) -> subprocess.CompletedProcess[str]:
        """The result of invocation `name`, run once per module (after what it needs)."""
        if name not in self.results:
            invocation = BY_NAME[name]
            for before in invocation.after:
                self.run(before)
            self.results[name] = self.execute(invocation)
        return self.results[name]

    def run_all(self, invocations: tuple[Invocation, ...]) -> None:
        """Run invocations side by side whose prerequisites have run: most of their time is
        spent waiting (for the retries against the unreachable port), not computing."""
        assert all(set(i.after) <= self.results.keys() for i in invocations)
        with ThreadPoolExecutor(max_workers=8) as pool:
            done = pool.map(self.execute, invocations)
            self.results.update(zip((i.name for i in invocations), done, strict=True))


def _copy_matrix(directory: Path, text: str) -> None:
    """matrix.yaml as `text` in `directory`, beside a link to the shipped csrc/."""
    directory.mkdir()
    (directory / "matrix.yaml").write_text(text, encoding="utf-8")
    (directory / "csrc").symlink_to(REPO / "csrc", target_is_directory=True)


GPU_GATE = """
gpu-gate:
  runners:
    - {labels: [self-hosted, linux, x64, h200], sms: [90]}
  command: bash csrc/tests/gpu/run_on_device.sh {wheel} {expect_arch}
"""


@contextmanager
def workspace_at(tmp: Path, cache: Path) -> Iterator[Workspace]:
    """The two matrix copies in `tmp`, and a port of 127.0.0.1 held bound but not
    listening: every connection to it is refused."""
    shipped = (REPO / "matrix.yaml").read_text(encoding="utf-8")
    assert "\ndefaults:\n" in shipped
    _copy_matrix(tmp / "bad", shipped.replace("\ndefaults:\n", "\ndefaults:\n  arch: [x86_64]\n"))
    _copy_matrix(tmp / "gate", shipped + GPU_GATE)
    shutil.copytree(
        REPO / "csrc", tmp / "init-csrc", ignore=shutil.ignore_patterns("build", "__pycache__")
    )
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        yield Workspace(tmp=tmp, cache=cache, unreachable=f"http://127.0.0.1:{port}")


def standin_dist(dist: Path) -> Manifest:
    """What `release build` of the shipped matrix leaves in `dist`, with small stand-in
    wheels: one real wheel per cell under the cell's filename (its project, version and
    platform tag), each entry with the cell's SMs and PTX, and the NCCL files."""
    matrix = load_matrix(REPO / "matrix.yaml")
    entries = [
        standin_entry(dist, cell, made_by="tests/integration/interface.py") for cell in matrix.cells
    ]
    nccl = subprocess.run(
        [str(RELEASE), "nccl", "--out", str(dist), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    files = tuple(Path(f["path"]).name for f in json.loads(nccl.stdout)["files"])
    manifest = Manifest(
        project=matrix.project.name,
        version=str(matrix.project.version),
        wheels=tuple(entries),
        nccl_files=files,
        source_date_epoch=int(EPOCH),
    )
    write_manifest(manifest, dist / "manifest.json")
    return manifest


def observed(workspace: Workspace, invocation: Invocation) -> dict[str, Any]:
    """The normalised record of one invocation, as its golden file holds it."""
    result = workspace.run(invocation.name)
    places = workspace.placeholders()
    record: dict[str, Any] = {"argv": ["release", *invocation.args], "exit_code": result.returncode}
    if invocation.stdout == "json":
        document = normalise(json.loads(result.stdout), places) if result.stdout.strip() else None
        record["top_level_keys"] = list(document) if isinstance(document, dict) else None
        record["document"] = document
    else:
        record["text"] = normalise(result.stdout, places)
    record["diagnostics"] = [
        normalise(line, places)
        for line in result.stderr.splitlines()
        if line.startswith(DIAGNOSTICS)
    ]
    return record


def check_unchanged(workspace: Workspace, invocation: Invocation) -> None:
    """The invocation's record equals its golden file (or, recording, becomes it)."""
    record = observed(workspace, invocation)
    golden_file = GOLDEN / f"{invocation.name}.json"
    if RECORDING:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
        golden_file.write_text(text, encoding="utf-8")
        return
    if not golden_file.is_file():
        pytest.fail(
            f"no golden file {golden_file.relative_to(REPO)}: record it with RECORD_GOLDEN=1"
        )
    golden = json.loads(golden_file.read_text(encoding="utf-8"))
    stderr = workspace.results[invocation.name].stderr[-3000:]
    assert record["argv"] == golden["argv"], "the invocation changed: re-record deliberately"
    assert record["exit_code"] == golden["exit_code"], stderr
    assert record["diagnostics"] == golden["diagnostics"], stderr
    if invocation.stdout == "json":
        assert record["top_level_keys"] == golden["top_level_keys"]
        assert record["document"] == golden["document"], stderr
        assert ordered(record["document"]) == ordered(golden["document"]), "key order changed"
    else:
        assert record["text"] == golden["text"], stderr
    assert record == golden
