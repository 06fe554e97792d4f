"""Reading the GitHub Actions workflows, and running their `run:` steps against stubs.

Each `run:` script is executed by bash (as GitHub runs it: `bash -e -o pipefail`) with the
step's `env:` filled with sample values and a PATH that holds only recording stubs of the
commands a step may call: `release`, pip installs, the build and check tools of the tool's
own release, `gh`, and file plumbing. Anything else fails with "command not found". The
tests parse every recorded `release` call with the real CLI parser, so a renamed flag
breaks a test, not a release.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from release import __version__

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
WHEELS = WORKFLOWS / "wheels.yml"
RELEASE = WORKFLOWS / "release.yml"
TOOL_RELEASE = WORKFLOWS / "tool-release.yml"
CI = WORKFLOWS / "ci.yml"
WATCH = WORKFLOWS / "watch.yml"
CALLER = ROOT / "tests" / "data" / "workflows" / "caller.yml"
TOOL_REPOSITORY = "k3-project/cuda-wheel-release"

PLUMBING = ("ls", "mv", "cp", "mkdir", "cat", "git")
TOOLS = ("hatchling", "twine", "check-wheel-contents", "sha256sum", "gh")
STUBS = ("release", "python", "python3", "pip", *TOOLS, *PLUMBING)
STUB_DIGEST = "5e" * 32

# Sample values of the expressions steps pass through `env:`.
SAMPLES = {
    "matrix.cuda": "12.9",
    "matrix.arch": "aarch64",
    "matrix.id": "12.9-aarch64",
    "matrix.cuda_home": "",
    "matrix.runner": "self-hosted/linux/h200",
    "inputs.tool-version": __version__,
    "inputs.gpu-runner-labels": '{"self-hosted/linux/h200": ["flash-h200"]}',
    "inputs.latest || '3'": "3",
    "github.ref_type == 'tag' && github.ref_name || ''": f"v{__version__}",
    "github.ref_name": f"v{__version__}",
    "github.workflow_ref": "acme/flash-kernels/.github/workflows/release.yml@refs/tags/v1.2.0",
    "runner.temp": "/home/runner/work/_temp",
    "github.token": "ghs_sampleToken0000",
    "secrets.pypi-token": "",
    "secrets.pypi-token != ''": "false",
    "steps.deployment.outputs.page_url": "https://k3-project.github.io/k3-kernels/",
    "steps.version.outputs.version": __version__,
}


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    return data


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
    for path in paths or tuple(sorted(WORKFLOWS.glob("*.yml"))):
        for job_name, job in load(path)["jobs"].items():
            for index, step in enumerate(job.get("steps", [])):
                yield Step(path.name, job_name, index, step)


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


def sample(value: object, samples: Mapping[str, str] = SAMPLES) -> str:
    def one(match: re.Match[str]) -> str:
        return samples.get(match.group(1).strip(), "sample")

    return re.sub(r"\$\{\{(.*?)\}\}", one, str(value))


def run_step(
    step: Step,
    stub_dir: Path,
    tmp: Path,
    *,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> list[list[str]]:
    """Runs the step's script in `tmp` (with an empty dist/), returns the calls it made;
    `env` adds to (or replaces) the step's own, sampled, environment."""
    log = tmp / "calls.jsonl"
    log.write_text("", encoding="utf-8")
    (tmp / "dist").mkdir(exist_ok=True)
    workflow_env = load(WORKFLOWS / step.workflow).get("env", {})
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
        **{
            str(k): sample(v, {**SAMPLES, "inputs.matrix": "matrix.yaml"})
            for k, v in workflow_env.items()
        },
        **{str(k): sample(v) for k, v in step.data.get("env", {}).items()},
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
