"""A first tag of another repository through the files `release init` writes: the caller it
writes for a copy of tests/fixtures/extension_template, played job by job in `needs:`
order. Each job's `if:` is evaluated for the run (tests/integration/expressions.py); a job
that calls a reusable workflow runs that workflow's jobs with the inputs the caller gives
(their `if:`s too) and hands on its outputs; the caller's own publish job runs the steps of
the publish action with the inputs its step gives. Every `run:` step of every job that runs
is executed against stubs (tests/integration/workflows.py) and its `release` calls parsed by
the real CLI: plan -> build -> reproduce -> publish (the caller's) -> index -> verify, once
for trusted publishing and once with a token.

What this does not do: run those `release` calls for real against the PyPI and GitHub
stand-ins (the full tier's end-to-end of issue 44; see docs/ci.md).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from release import __version__
from release.cli import build_parser
from tests.integration.expressions import TEMPLATE, Status, condition_holds, evaluate, needs_of
from tests.integration.workflows import (
    PUBLISH_ACTION,
    ROOT,
    Run,
    Step,
    allowed,
    load,
    make_stubs,
    resolve,
    run_step,
    steps,
    triggers,
)

RELEASE = Path(sys.executable).with_name("release")
TOKEN = "pypi-AgEsampleToken0000"
FIRST_TAG = Run({
    "github.ref": "refs/tags/v0.0.1",
    "github.ref_name": "v0.0.1",
    "github.workflow_ref": "acme/extension-cpp/.github/workflows/release.yml@refs/tags/v0.0.1",
    "secrets.PYPI_API_TOKEN": TOKEN,
})  # fmt: skip


@pytest.fixture(scope="module")
def stub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_stubs(tmp_path_factory.mktemp("stubs"))


def init_caller(tmp_path: Path, *options: str) -> Path:
    """`release init` on a copy of the extension template, in a git repository of its own."""
    project = tmp_path / "extension-cpp"
    shutil.copytree(ROOT / "tests" / "fixtures" / "extension_template", project)
    (project / ".git").mkdir()
    done = subprocess.run(
        [str(RELEASE), "init", "--offline", *options, str(project)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return project / ".github" / "workflows" / "release.yml"


def typed(value: Any, context: dict[str, Any]) -> Any:
    """A `with:` value as GitHub passes it: a whole expression keeps its type."""
    if not isinstance(value, str):
        return value
    whole = TEMPLATE.fullmatch(value.strip())
    if whole is not None:
        return evaluate(whole.group(1), context)
    return TEMPLATE.sub(lambda m: str(evaluate(m.group(1), context)), value)


@dataclass
class Played:
    """Each job's result ("caller-job" or "caller-job/called-job"), and the `release` calls
    and the filled `env:` of the steps that ran, by job."""

    results: dict[str, str] = field(default_factory=dict)
    calls: dict[str, list[argparse.Namespace]] = field(default_factory=dict)
    argv: dict[str, list[list[str]]] = field(default_factory=dict)
    envs: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def ran(self) -> list[str]:
        return [job for job, result in self.results.items() if result == "success"]


class Player:
    def __init__(self, run: Run, stub_dir: Path, tmp_path: Path) -> None:
        self.run, self.stub_dir, self.tmp = run, stub_dir, tmp_path
        self.played = Played()
        self.parser = build_parser()

    def play(self, caller: Path) -> Played:
        outputs: dict[str, dict[str, Any]] = {}
        for name, job in load(caller)["jobs"].items():
            needs = needs_of(job)
            context = {
                **self.run.context,
                "needs": {
                    n: {"result": self.played.results[n], "outputs": outputs.get(n, {})}
                    for n in needs
                },
            }
            status = Status(
                success=all(self.played.results[n] == "success" for n in needs),
                failure=any(self.played.results[n] == "failure" for n in needs),
            )
            if not condition_holds(job.get("if"), context, status):
                self.played.results[name] = "skipped"
                continue
            self.played.results[name] = "success"
            if "uses" in job:
                outputs[name] = self.called(name, resolve(job["uses"]), job, context)
            else:
                outputs[name] = self.own(name, job, context)
        return self.played

    def called(
        self, name: str, path: Path, job: dict[str, Any], context: dict[str, Any]
    ) -> dict[str, Any]:
        called = triggers(load(path))["workflow_call"]
        declared = called["inputs"]
        inputs = {f"inputs.{k}": spec.get("default") for k, spec in declared.items()}
        inputs |= {f"inputs.{k}": typed(v, context) for k, v in job.get("with", {}).items()}
        # the secrets it declares: those the caller passes, the others empty
        inputs |= {f"secrets.{k}": "" for k in called.get("secrets", {})}
        inputs |= {f"secrets.{k}": typed(v, context) for k, v in job.get("secrets", {}).items()}
        inner = self.run.with_values(inputs)
        for called_job, result in inner.jobs(path).items():
            self.played.results[f"{name}/{called_job}"] = result
        for step in inner.steps(path):
            self.execute(f"{name}/{step.job}", step, inner)
        return inner.outputs(path)

    def own(self, name: str, job: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """A job of the caller: its one step of note is the publish action's."""
        step_outputs: dict[str, Any] = {}
        for data in job["steps"]:
            if resolve(data["uses"]) != PUBLISH_ACTION:
                continue
            declared = load(PUBLISH_ACTION)["inputs"]
            inputs = {f"inputs.{k}": spec.get("default", "") for k, spec in declared.items()}
            inputs |= {f"inputs.{k}": typed(v, context) for k, v in data.get("with", {}).items()}
            inner = self.run.with_values(inputs)
            for step in steps(PUBLISH_ACTION):
                if condition_holds(step.data.get("if"), inner.context):
                    self.execute(name, step, inner)
            given = load(PUBLISH_ACTION)["outputs"]
            step_outputs[data["id"]] = {
                "outputs": {k: inner.fill(v["value"]) for k, v in given.items()}
            }
        filled = {**context, "steps": step_outputs}
        return {k: typed(v, filled) for k, v in job.get("outputs", {}).items()}

    def execute(self, job: str, step: Step, run: Run) -> None:
        self.played.envs.setdefault(job, []).append(
            {str(k): run.fill(v) for k, v in step.data.get("env", {}).items()}
        )
        if not step.run:
            return
        tmp = self.tmp / job.replace("/", "-") / str(step.index)
        tmp.mkdir(parents=True)
        for call in run_step(step, self.stub_dir, tmp, run=run):
            assert allowed(call), f"{step.where}: {call}"
            if call[0] == "release" and call[1:] != ["--version"]:
                parsed = self.parser.parse_args(call[1:])
                self.played.calls.setdefault(job, []).append(parsed)
                self.played.argv.setdefault(job, []).append(call[1:])


RELEASED = [
    "build", "build/plan", "build/build", "build/reproduce", "publish", "verify",
    "verify/index", "verify/verify",
]  # fmt: skip


@pytest.mark.parametrize("token", [None, "PYPI_API_TOKEN"])
def test_a_first_tag_runs_every_stage_through_the_files_init_writes(
    token: str | None, stub_dir: Path, tmp_path: Path
) -> None:
    options = ("--pypi-token-secret", token) if token else ()
    caller = init_caller(tmp_path, *options)
    played = Player(FIRST_TAG, stub_dir, tmp_path / "run").play(caller)
    assert played.ran() == RELEASED
    # no GPU gate named by the template's matrix: skipped; nothing of a dry run or nightly
    skipped = {j for j, r in played.results.items() if r == "skipped"}
    assert skipped == {"build/gpu", "build/publish-dry-run", "build/publish-nightly"}
    commands = {job: [a.command for a in calls] for job, calls in played.calls.items()}
    assert commands == {
        "build/plan": ["matrix", "matrix", "plan"],
        "build/build": ["build", "plan"],
        "build/reproduce": ["build"],
        "publish": ["publish"],
        "verify/verify": ["verify"],
    }
    (plan,) = [a for a in played.calls["build/plan"] if a.command == "plan"]
    assert (plan.expect_tag, plan.matrix) == ("v0.0.1", Path("matrix.yaml"))
    # the build jobs of a tag build the sdist (the job of its cell does); a rebuild does not
    (build,) = [a for a in played.calls["build/build"] if a.command == "build"]
    (rebuild,) = played.calls["build/reproduce"]
    assert (build.sdist, rebuild.sdist, rebuild.compare is not None) == (True, False, True)
    (publish,) = played.calls["publish"]
    assert (publish.dry_run, publish.dist, publish.index_dir) == (
        False, Path("dist"), Path("dist/index"),
    )  # fmt: skip
    (verify,) = played.calls["verify/verify"]
    assert verify.require_provenance is True
    assert verify.provenance_workflow == ".github/workflows/release.yml"
    assert verify.provenance_signer_workflow is None, "the caller's own job signed"
    # the credential the caller's publish job hands the upload, and what it signs
    (sign,) = [e for e in played.envs["publish"] if "TOKEN_UPLOAD" in e]
    (upload,) = [e for e in played.envs["publish"] if "TWINE_API_KEY" in e]
    if token is None:  # trusted publishing: no token anywhere; every wheel PEP 740-signed
        assert (upload["TWINE_API_KEY"], sign["TOKEN_UPLOAD"]) == ("", "false")
    else:
        assert (upload["TWINE_API_KEY"], sign["TOKEN_UPLOAD"]) == (TOKEN, "true")


def test_a_destination_in_another_repository_gets_its_token_where_it_is_read_and_written(
    stub_dir: Path, tmp_path: Path
) -> None:
    """`release init --destination-token-secret GH_PAT_FOR_WHL_RELEASE`: the secret reaches
    the publish action's upload step with its name, and the steps of the reusable workflows
    that read the destinations (plan, verify), and no other step."""
    name, token = "GH_PAT_FOR_WHL_RELEASE", "github_pat_sampleWhlToken0000"
    caller = init_caller(tmp_path, "--destination-token-secret", name)
    run = FIRST_TAG.with_values({f"secrets.{name}": token})
    played = Player(run, stub_dir, tmp_path / "run").play(caller)
    assert played.ran() == RELEASED
    holding = {
        job: [e["DESTINATION_TOKEN_SECRET"] for e in envs if e.get("DESTINATION_TOKEN") == token]
        for job, envs in played.envs.items()
    }
    assert {job: names for job, names in holding.items() if names} == {
        "build/plan": [name],
        "publish": [name],
        "verify/verify": [name],
    }


def test_a_manual_run_of_the_caller_is_a_dry_run_and_publishes_nothing(
    stub_dir: Path, tmp_path: Path
) -> None:
    caller = init_caller(tmp_path)
    run = FIRST_TAG.with_values({"github.event_name": "workflow_dispatch"})
    played = Player(run, stub_dir, tmp_path / "run").play(caller)
    assert played.ran() == [
        "build", "build/plan", "build/build", "build/reproduce", "build/publish-dry-run",
    ]  # fmt: skip
    assert (played.results["publish"], played.results["verify"]) == ("skipped", "skipped")
    (dry,) = played.calls["build/publish-dry-run"]
    assert (dry.command, dry.dry_run) == ("publish", True)


def test_a_caller_whose_tool_version_lags_its_pin_stops_in_the_plan_job(
    stub_dir: Path, tmp_path: Path
) -> None:
    """Dependabot moved the `uses:` pins; tool-version still names the old release."""
    caller = init_caller(tmp_path)
    text = caller.read_text(encoding="utf-8")
    caller.write_text(text.replace(f'tool-version: "{__version__}"', 'tool-version: "0.0.9"'))
    with pytest.raises(AssertionError, match=r"wheels\.yml: plan step 1 \(The called workflow"):
        Player(FIRST_TAG, stub_dir, tmp_path / "run").play(caller)
