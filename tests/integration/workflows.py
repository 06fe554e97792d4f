"""Reading the GitHub Actions workflows, and running their `run:` steps against stubs.

Each `run:` script is executed by bash (as GitHub runs it: `bash -e -o pipefail`) with the
step's `env:` filled in from a `Run` (the contexts of one run: its event, ref, inputs and
secrets, and sample values of the rest; tests/integration/expressions.py evaluates the
expressions) and a PATH that holds only recording stubs of the commands a step may call:
`release`, pip installs, the build and check tools of the tool's own release, `gh`, and
file plumbing. Anything else fails with "command not found". The tests parse every
recorded `release` call with the real CLI parser, so a renamed flag breaks a test, not a
release. A `Run` also says which jobs of a workflow run and which of their steps, from
their `if:`s.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from release import __version__
from release.cli import build_parser
from tests.integration.expressions import Status, condition_holds, needs_of, substitute

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
WHEELS = WORKFLOWS / "wheels.yml"
WHEELS_VERIFY = WORKFLOWS / "wheels-verify.yml"
PUBLISH_ACTION = ROOT / "actions" / "publish" / "action.yml"
RELEASE = WORKFLOWS / "release.yml"
TOOL_RELEASE = WORKFLOWS / "tool-release.yml"
CI = WORKFLOWS / "ci.yml"
WATCH = WORKFLOWS / "watch.yml"
NIGHTLY = WORKFLOWS / "nightly.yml"
CALLER = ROOT / "tests" / "data" / "workflows" / "caller.yml"
NIGHTLY_CALLER = ROOT / "tests" / "data" / "workflows" / "nightly-caller.yml"
TOOL_REPOSITORY = "k3-project/cuda-wheel-release"

PLUMBING = ("ls", "mv", "cp", "mkdir", "cat", "git")
TOOLS = ("hatchling", "twine", "check-wheel-contents", "sha256sum", "gh")
STUBS = ("release", "python", "python3", "pip", *TOOLS, *PLUMBING)
STUB_DIGEST = "5e" * 32

# The contexts of a run, by path: a release's pushed tag, with sample values of what the
# expressions of every workflow read. A `Run` changes some of them.
SAMPLES: dict[str, Any] = {
    "github.event_name": "push",
    "github.ref": f"refs/tags/v{__version__}",
    "github.ref_type": "tag",
    "github.ref_name": f"v{__version__}",
    "github.sha": "c0ffee" * 6 + "c0ff",
    "github.repository": "acme/flash-kernels",
    "github.event.repository.default_branch": "main",
    "github.workflow_ref": "acme/flash-kernels/.github/workflows/release.yml@refs/tags/v1.2.0",
    "github.token": "ghs_sampleToken0000",
    "inputs.matrix": "matrix.yaml",
    "inputs.tool-version": __version__,
    "inputs.gpu-runner-labels": '{"self-hosted/linux/h200": ["flash-h200"]}',
    "inputs.retention-days": 7,
    "inputs.channel": "release",
    "inputs.latest": "",
    "inputs.pypi-token": "",
    "inputs.index": True,
    "secrets.aws-access-key-id": "",
    "secrets.aws-secret-access-key": "",
    # a destination in another repository: none, unless a run says so
    "inputs.token": "",
    "inputs.token-secret": "",
    "secrets.destination-token": "",
    "matrix.cuda": "12.9",
    "matrix.arch": "aarch64",
    "matrix.id": "12.9-aarch64",
    "matrix.cuda_home": "",
    "matrix.container": "",
    "matrix.runs_on": "ubuntu-24.04-arm",
    "matrix.pythons": "",
    "matrix.python": "3.12",
    "matrix.runner": "self-hosted/linux/h200",
    "matrix.labels": '["self-hosted", "linux", "h200"]',
    "runner.temp": "/home/runner/work/_temp",
    "runner.os": "Linux",
    "runner.arch": "X64",
    # the outputs of the steps that jobs and steps read, by step id
    "steps.matrix.outputs.matrix": '{"include":[{"id":"12.9-aarch64"}]}',
    "steps.gpu.outputs.matrix": '{"include":[]}',
    "steps.index.outputs.pages": "true",
    "steps.deployment.outputs.page_url": "https://k3-project.github.io/k3-kernels/",
    "steps.version.outputs.version": __version__,
    "steps.install.outcome": "success",
}


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, last = path.split(".")
        here = nested
        for name in parents:
            here = here.setdefault(name, {})
        here[last] = value
    return nested


@dataclass(frozen=True)
class Run:
    """One run of the workflows: its contexts, by path (SAMPLES, with `values` over them)."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def with_values(self, values: Mapping[str, Any]) -> Run:
        return Run({**self.values, **values})

    @property
    def context(self) -> dict[str, Any]:
        return nest({**SAMPLES, **self.values})

    def fill(self, value: object) -> str:
        return substitute(value, self.context)

    def jobs(self, path: Path) -> dict[str, str]:
        """Each job's result in this run: success (it ran) or skipped, from its `if:` and
        what it needs (a job whose needed job did not succeed is skipped, unless its `if:`
        asks a status function)."""
        return self._jobs(load(path))[0]

    def outputs(self, path: Path) -> dict[str, Any]:
        """A called workflow's outputs in this run (`on.workflow_call.outputs`), from its
        jobs' outputs."""
        workflow = load(path)
        results, _, outputs = self._jobs(workflow)
        jobs = {n: {"result": r, "outputs": outputs.get(n, {})} for n, r in results.items()}
        declared = triggers(workflow)["workflow_call"].get("outputs", {})
        context = {**self.context, "jobs": jobs}
        return {k: substitute(v["value"], context) for k, v in declared.items()}

    def _jobs(
        self, workflow: Mapping[str, Any]
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]], dict[str, dict[str, str]]]:
        """Each job's result, the `needs` context of each job, and each job's outputs."""
        results: dict[str, str] = {}
        outputs: dict[str, dict[str, str]] = {}
        needs_of_job: dict[str, dict[str, Any]] = {}
        for name, job in workflow["jobs"].items():
            needs = needs_of(job)
            needs_of_job[name] = {
                n: {"result": results[n], "outputs": outputs.get(n, {})} for n in needs
            }
            context = {**self.context, "needs": needs_of_job[name]}
            status = Status(
                success=all(results[n] == "success" for n in needs),
                failure=any(results[n] == "failure" for n in needs),
            )
            if condition_holds(job.get("if"), context, status):
                results[name] = "success"
                given = job.get("outputs", {})
                outputs[name] = {k: substitute(v, context) for k, v in given.items()}
            else:
                results[name] = "skipped"
        return results, needs_of_job, outputs

    def steps(self, path: Path) -> list[Step]:
        """The steps this run runs: those of the jobs that run, whose `if:` holds."""
        results, needs, _ = self._jobs(load(path))
        return [
            step
            for step in steps(path)
            if results[step.job] == "success"
            and condition_holds(step.data.get("if"), {**self.context, "needs": needs[step.job]})
        ]


TAG_PUSH = Run()


def load(path: Path) -> dict[str, Any]:
    """The workflow file at `path`, parsed again only where its text is new to the process
    (a test run asks for the same few workflows thousands of times); a copy each time."""
    data: dict[str, Any] = copy.deepcopy(_parsed(path.read_text(encoding="utf-8")))
    return data


@functools.lru_cache(maxsize=128)
def _parsed(text: str) -> Any:
    return YAML(typ="safe").load(text)


def triggers(workflow: Mapping[Any, Any]) -> Mapping[str, Any]:
    # YAML 1.1 readers turn the key `on` into True
    found: Mapping[str, Any] = workflow.get("on", workflow.get(True))
    return found


@dataclass(frozen=True)
class Step:
    workflow: str
    job: str
    index: int
    data: Mapping[str, Any]

    @property
    def where(self) -> str:
        return f"{self.workflow}: {self.job} step {self.index} ({self.data.get('name', '')})"

    @property
    def run(self) -> str:
        return str(self.data.get("run", ""))

    @property
    def uses(self) -> str:
        return str(self.data.get("uses", ""))


def steps(*paths: Path) -> Iterator[Step]:
    """The steps of each workflow's jobs; a composite action's (actions/*/action.yml) as
    those of one job named after its directory."""
    for path in paths or tuple(sorted(WORKFLOWS.glob("*.yml"))):
        data = load(path)
        if "runs" in data:
            for index, step in enumerate(data["runs"]["steps"]):
                yield Step(path.name, path.parent.name, index, step)
            continue
        for job_name, job in data["jobs"].items():
            for index, step in enumerate(job.get("steps", [])):
                yield Step(path.name, job_name, index, step)


def resolve(uses: str) -> Path:
    """The file of this checkout that a caller's `uses:` names (a workflow or an action),
    by a local path or the tool's repository at a commit (a tag fails: callers pin by SHA)."""
    if uses.startswith("./"):
        path = ROOT / uses
    else:
        match = re.fullmatch(rf"{TOOL_REPOSITORY}/([\w./-]+)@([0-9a-f]{{40}})", uses)
        assert match is not None, f"not pinned to a commit: {uses}"
        path = ROOT / match.group(1)
    return path / "action.yml" if path.is_dir() else path


def job_steps(path: Path, job: str) -> list[Step]:
    return [s for s in steps(path) if s.job == job]


STUB = """#!{python}
import json, os, sys
name, args = os.path.basename(sys.argv[0]), sys.argv[1:]
with open(os.environ["STUB_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps([name, *args]) + "\\n")
if os.environ.get("STUB_FAIL") == name:
    sys.exit(3)
if name == "release" and args == ["--version"]:
    print("release {version}")
elif name == "hatchling" and args == ["version"]:
    print("{version}")
elif name == "sha256sum":
    print("{digest}  " + args[0])
elif name in ("python", "python3") and args[:2] == ["-m", "venv"]:
    bin = os.path.join(args[2], "bin")
    os.makedirs(bin, exist_ok=True)
    for tool in ("python", "pip", "release"):
        with open(os.path.join(bin, tool), "w") as stub:
            stub.write(open(sys.argv[0]).read())
        os.chmod(os.path.join(bin, tool), 0o755)
elif name == "gh" and args[:2] == ["release", "download"]:
    into, pattern = args[args.index("--dir") + 1], args[args.index("--pattern") + 1]
    os.makedirs(into, exist_ok=True)
    open(os.path.join(into, pattern), "w").close()
"""


def make_stubs(directory: Path) -> Path:
    text = STUB.format(python=sys.executable, version=__version__, digest=STUB_DIGEST)
    for name in STUBS:
        path = directory / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
    return directory


def run_step(
    step: Step,
    stub_dir: Path,
    tmp: Path,
    *,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    run: Run = TAG_PUSH,
) -> list[list[str]]:
    """Runs the step's script in `tmp` (with an empty dist/), returns the calls it made;
    its environment is the workflow's and the step's `env:` as `run` fills them in, and
    `env` adds to (or replaces) it."""
    log = tmp / "calls.jsonl"
    log.write_text("", encoding="utf-8")
    (tmp / "dist").mkdir(exist_ok=True)
    source = WORKFLOWS / step.workflow
    workflow_env = load(source).get("env", {}) if source.exists() else {}
    full_env = {
        "PATH": str(stub_dir),
        "STUB_LOG": str(log),
        "HOME": str(tmp),
        "RUNNER_TEMP": str(tmp),
        "GITHUB_WORKSPACE": str(tmp),
        "GITHUB_REPOSITORY": "acme/flash-kernels",
        "GITHUB_OUTPUT": str(tmp / "output"),
        "GITHUB_ENV": str(tmp / "env"),
        "GITHUB_PATH": str(tmp / "path"),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary"),
        **{str(k): run.fill(v) for k, v in workflow_env.items()},
        **{str(k): run.fill(v) for k, v in step.data.get("env", {}).items()},
        **(env or {}),
    }
    result = subprocess.run(
        ["/bin/bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step.run],
        env=full_env,
        cwd=tmp,
        capture_output=True,
        text=True,
        check=False,
    )
    if check:
        assert result.returncode == 0, f"{step.where}: {result.stderr.strip()}"
    elif result.returncode == 0:
        raise AssertionError(f"{step.where}: expected a failure, got exit 0")
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def pip_install(call: list[str]) -> list[str] | None:
    """The arguments after `install` of a pip call (`pip`, `python -m pip`, a venv's pip)."""
    name, args = call[0], call[1:]
    if name in ("python", "python3") and args[:3] == ["-m", "pip", "install"]:
        return args[3:]
    if name == "pip" and args[:1] == ["install"]:
        return args[1:]
    return None


def hash_locked(install: list[str]) -> bool:
    """Everything comes from a requirements file, each file by its hash, nothing resolved."""
    return "--require-hashes" in install and "--no-deps" in install and "-r" in install


def allowed(call: list[str]) -> bool:
    name, args = call[0], call[1:]
    if name in ("release", "hatchling", "twine", "check-wheel-contents", "sha256sum", *PLUMBING):
        return True
    if pip_install(call) is not None:
        return True
    if name in ("python", "python3"):
        return args[:2] in (["-m", "venv"], ["-m", "build"]) or args[:3] == [
            "-m",
            "pypi_attestations",
            "sign",
        ]
    if name == "gh":
        return args[:2] in (
            ["release", "download"],
            ["attestation", "verify"],
            ["release", "create"],
        )
    return False


def wheels_jobs() -> dict[str, Any]:
    found: dict[str, Any] = load(WHEELS)["jobs"]
    return found


def release_calls(
    found: list[Step],
    stub_dir: Path,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    run: Run = TAG_PUSH,
) -> list[argparse.Namespace]:
    """The `release` calls of the `run:` steps in `found`, each parsed by the real CLI (a
    step that calls anything `allowed` does not allow, or a call that does not parse,
    fails the test)."""
    parser = build_parser()
    parsed = []
    for step in found:
        if not step.run:
            continue
        tmp = tmp_path / f"{step.job}-{step.index}"
        tmp.mkdir(parents=True, exist_ok=True)
        for call in run_step(step, stub_dir, tmp, env=env, run=run):
            assert allowed(call), f"{step.where}: {call}"
            if call[0] == "release" and call[1:] != ["--version"]:
                try:
                    parsed.append(parser.parse_args(call[1:]))
                except SystemExit:
                    pytest.fail(f"{step.where}: `release {' '.join(call[1:])}` does not parse")
    return parsed
