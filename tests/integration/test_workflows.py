"""Every GitHub Actions workflow: the schema, actionlint, zizmor, action pins, permissions,
timeouts, hash-locked installs wherever a token can write, CI per Python, dependabot, and
the tags that start the tool's release and the example's.

The reusable workflow's jobs and the tool's release, run step by step against stubs, are in
test_wheels_workflow.py (helpers: tests/integration/workflows.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from release import __version__
from release.cli import build_parser
from tests.integration.expressions import Status, condition_holds
from tests.integration.workflows import (
    CALLER,
    CI,
    NIGHTLY,
    NIGHTLY_CALLER,
    PUBLISH_ACTION,
    RELEASE,
    ROOT,
    TAG_PUSH,
    TOOL_RELEASE,
    WATCH,
    WHEELS,
    WHEELS_VERIFY,
    WORKFLOWS,
    hash_locked,
    job_steps,
    load,
    make_stubs,
    pip_install,
    run_step,
    steps,
    triggers,
)

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

BIN = Path(sys.executable).parent
ALL = sorted(WORKFLOWS.glob("*.yml"))
WRITE = "write"
# The newest CPython with wheels of every dependency on PyPI (checked 2026-12-03: 3.15's
# cp315 wheels of pydantic-core, cryptography, nh3, msgpack, mypy, pyyaml, rpds-py, cffi).
NEWEST_PYTHON = (3, 15)


@pytest.fixture(scope="module")
def stub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_stubs(tmp_path_factory.mktemp("stubs"))


def test_the_workflows_are_these() -> None:
    assert [p.name for p in ALL] == [
        "ci.yml", "nightly.yml", "release.yml", "tool-release.yml", "watch.yml",
        "wheels-verify.yml", "wheels.yml",
    ]  # fmt: skip
    assert sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "actions").rglob("*.yml")) == [
        "actions/publish/action.yml"
    ]


def test_workflows_and_dependabot_validate_against_their_schemas() -> None:
    for schema, files in (
        ("vendor.github-workflows", [*map(str, ALL), str(CALLER), str(NIGHTLY_CALLER)]),
        ("vendor.dependabot", [str(ROOT / ".github" / "dependabot.yml")]),
        ("vendor.github-actions", [str(PUBLISH_ACTION)]),
    ):
        result = subprocess.run(
            [str(BIN / "check-jsonschema"), "--builtin-schema", schema, *files],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def actionlint(*paths: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    # shellcheck and pyflakes are not installed: actionlint's own checks only
    return subprocess.run(
        [str(BIN / "actionlint"), "-shellcheck=", "-pyflakes=", "-format", "{{json .}}"]
        + [str(p) for p in paths],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def test_actionlint_reports_nothing() -> None:
    result = actionlint(*ALL, CALLER, NIGHTLY_CALLER)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_what_it_is_here_for(tmp_path: Path) -> None:
    """The same linter on a broken copy: an input wheels.yml does not declare."""
    broken = tmp_path / "wheels.yml"
    broken.write_text(
        WHEELS.read_text(encoding="utf-8").replace("inputs.retention-days", "inputs.retention"),
        encoding="utf-8",
    )
    result = actionlint(broken)
    assert result.returncode == 1
    assert "retention" in result.stdout


def test_actionlint_holds_a_callers_grant_to_every_job_of_wheels_verify_yml(
    tmp_path: Path,
) -> None:
    """GitHub refuses a run whose caller grants less than any job of the called workflow
    asks for, a job that the run skips too: release.yml's verify job without the index
    job's scopes, as actionlint reads it (it follows a local `uses:` inside a repository)."""
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    shutil.copytree(ROOT / "actions", tmp_path / "actions")
    for path in (WHEELS, WHEELS_VERIFY, RELEASE):
        (workflows / path.name).write_bytes(path.read_bytes())
    lines = RELEASE.read_text(encoding="utf-8").splitlines()
    start = lines.index("  verify:")
    kept = lines[:start] + [
        line for line in lines[start:] if not re.match(r"\s+(id-token|pages):", line)
    ]
    narrow = workflows / "narrow.yml"
    narrow.write_text("\n".join(kept) + "\n")
    assert actionlint(workflows / "release.yml", cwd=tmp_path).returncode == 0
    result = actionlint(narrow, cwd=tmp_path)
    assert result.returncode == 1
    found = json.loads(result.stdout)
    assert {f["kind"] for f in found} == {"workflow-call"}
    refused = {m for f in found for m in re.findall(r'nested job "([\w-]+)"', f["message"])}
    assert refused == {"index"}


def test_zizmor_reports_nothing_above_low() -> None:
    result = subprocess.run(
        [
            str(BIN / "zizmor"),
            "--offline",
            "--format",
            "json",
            str(WORKFLOWS),
            str(ROOT / "actions"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(result.stdout)
    serious = [
        f"{f['ident']} ({f['determinations']['severity']}): {f['desc']}"
        for f in findings
        if f["determinations"]["severity"] not in ("Informational", "Low")
    ]
    assert serious == []
    assert result.returncode == 0, result.stderr


def test_ignored_zizmor_findings_are_the_guarded_cache_and_the_tools_images() -> None:
    """The suppressions: the build job's cache, restored only when nothing is published (a
    published build starts from empty caches), the containers `release matrix` names
    (release/toolchain/pins.py: zizmor cannot read through the matrix), and release.yml's
    `./` form of its own reusable workflows and publish action."""
    ignored = [
        (path.name, line.strip())
        for path in ALL
        for line in path.read_text(encoding="utf-8").splitlines()
        if "zizmor:" in line
    ]
    kinds = sorted((name, line.rsplit("# zizmor: ", 1)[1]) for name, line in ignored)
    assert kinds == [
        ("nightly.yml", "ignore[self-repository]"),
        ("release.yml", "ignore[self-repository]"),
        ("release.yml", "ignore[self-repository]"),
        ("release.yml", "ignore[self-repository]"),
        ("wheels.yml", "ignore[cache-poisoning]"),
        ("wheels.yml", "ignore[unpinned-images]"),
        ("wheels.yml", "ignore[unpinned-images]"),
    ]
    caches = [s for s in steps(WHEELS) if s.uses.startswith("actions/cache@")]
    assert [s.job for s in caches] == ["build"]
    assert caches[0].data["if"] == "needs.plan.outputs.publish != 'true'"
    jobs = load(WHEELS)["jobs"]
    assert [n for n, j in jobs.items() if "container" in j] == ["build", "reproduce"]
    for name in ("build", "reproduce"):
        assert jobs[name]["container"] == {"image": "${{ matrix.container }}"}


def test_every_action_is_pinned_to_a_full_commit_with_its_version() -> None:
    pattern = re.compile(
        r"\s*(?:-\s+)?uses:\s+([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # v\d+\.\d+\.\d+\b"
    )
    count = 0
    for path in [*ALL, PUBLISH_ACTION]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"\s*(?:-\s+)?uses:", line):
                if path in (RELEASE, NIGHTLY) and re.search(r"uses: \./(\.github|actions)/", line):
                    continue  # this repository's own reusable workflow, of the same commit
                count += 1
                assert pattern.match(line), f"{path.name}:{number}: {line.strip()}"
    assert count >= 30


def test_permissions_are_empty_at_the_top_and_least_per_job() -> None:
    for path in ALL:
        workflow = load(path)
        assert workflow["permissions"] == {}, path.name
        assert "pull_request_target" not in triggers(workflow)
        for name, job in workflow["jobs"].items():
            assert "permissions" in job, f"{path.name}: job {name} has no permissions"
            if "uses" not in job:
                assert job["permissions"].get("contents") in ("read", "write", None)
    jobs = load(WHEELS)["jobs"]
    for name in ("plan", "build", "reproduce", "gpu", "publish-dry-run", "publish-nightly"):
        assert jobs[name]["permissions"] == {"contents": "read"}, name
    after = load(WHEELS_VERIFY)["jobs"]
    assert after["index"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert after["verify"]["permissions"] == {"contents": "read"}
    publish = load(RELEASE)["jobs"]["publish"]
    assert publish["permissions"] == {
        "contents": "write",
        "id-token": "write",
        "attestations": "write",
    }
    assert publish["environment"]["name"] == "release"
    tool = load(TOOL_RELEASE)["jobs"]
    assert tool["build"]["permissions"] == {"contents": "read"}
    assert tool["pypi"]["permissions"] == {"id-token": "write"}
    assert tool["github-release"]["permissions"] == {
        "contents": "write",
        "id-token": "write",
        "attestations": "write",
    }


def test_every_job_has_a_timeout() -> None:
    for path in [*ALL, CALLER, NIGHTLY_CALLER]:
        for name, job in load(path)["jobs"].items():
            if "uses" in job:
                # a job that calls a reusable workflow takes no timeout; the called jobs have one
                assert "steps" not in job
                continue
            minutes = job.get("timeout-minutes")
            assert isinstance(minutes, int), f"{path.name}: job {name} has no timeout-minutes"
            assert 0 < minutes <= 180, f"{path.name}: job {name}: {minutes} minutes"


def writes(job: Mapping[str, Any]) -> bool:
    """Its token can write, or it is given a secret (the nightly's S3 keys write)."""
    permissions = job.get("permissions")
    given = [step.get("env", {}) for step in job.get("steps", [])]
    return (isinstance(permissions, dict) and WRITE in permissions.values()) or any(
        "secrets." in str(value) for env in given for value in env.values()
    )


def test_jobs_that_can_write_install_only_from_hash_locked_files(
    stub_dir: Path, tmp_path: Path
) -> None:
    """A job with a token that writes (contents, id-token, attestations, pages) or a secret
    runs nothing that was resolved at run time: every pip install is `--require-hashes
    --no-deps -r`."""
    checked: list[str] = []
    for path in ALL:
        for name, job in load(path)["jobs"].items():
            if "uses" in job or not writes(job):
                continue
            for step in (s for s in steps(path) if s.job == name and s.run):
                tmp = tmp_path / f"{path.stem}-{name}-{step.index}"
                tmp.mkdir()
                for call in run_step(step, stub_dir, tmp):
                    install = pip_install(call)
                    if install is not None:
                        assert hash_locked(install), f"{step.where}: {call}"
                        checked.append(step.where)
    # the publish action runs in the caller's publish job, which writes
    for step in (s for s in steps(PUBLISH_ACTION) if s.run):
        tmp = tmp_path / f"action-{step.index}"
        tmp.mkdir()
        for call in run_step(step, stub_dir, tmp):
            install = pip_install(call)
            if install is not None:
                assert hash_locked(install), f"{step.where}: {call}"
                checked.append(step.where)
    # the publish jobs install the tool, and so do the jobs that read the destinations with
    # the token of one in another repository (destination-token: plan, the dry run,
    # verify); the index and the tool's own publish jobs install nothing (deploy-pages,
    # gh-action-pypi-publish and gh only)
    assert sorted(checked) == [
        "action.yml: publish step 2 (Install the tool (hash-locked, nothing resolved))",
        "wheels-verify.yml: verify step 4 (Install the tool (hash-locked, nothing resolved))",
        "wheels.yml: plan step 6 (Install the tool (hash-locked, nothing resolved))",
        "wheels.yml: publish-dry-run step 3 (Install the tool (hash-locked, nothing resolved))",
        "wheels.yml: publish-nightly step 3 (Install the tool (hash-locked, nothing resolved))",
    ]


def test_no_job_of_the_reusable_workflow_resolves_anything(stub_dir: Path, tmp_path: Path) -> None:
    installs = 0
    for step in (s for s in steps(WHEELS, WHEELS_VERIFY, PUBLISH_ACTION) if s.run):
        tmp = tmp_path / f"{step.workflow}-{step.job}-{step.index}"
        tmp.mkdir()
        for call in run_step(step, stub_dir, tmp):
            install = pip_install(call)
            if install is not None:
                installs += 1
                assert hash_locked(install), f"{step.where}: {call}"
                assert "." not in install, step.where
                assert "-e" not in install, step.where
    assert installs == 8  # each job that runs the tool: plan to verify, but index


def test_no_expression_is_expanded_inside_a_run_script() -> None:
    for step in steps(*ALL, CALLER, NIGHTLY_CALLER, PUBLISH_ACTION):
        if step.run:
            assert "${{" not in step.run, step.where


# --- CI: the fast tier per Python, the full tier once. ---


def readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"Run the tests.*?```sh\n(.*?)\n```", readme, re.DOTALL)
    assert match is not None
    return match.group(1).strip()


def test_ci_runs_the_fast_tier_on_every_python_requires_python_admits() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    admitted = SpecifierSet(project["requires-python"])
    floor = (3, 10)
    assert f"{floor[0]}.{floor[1]}" in admitted
    assert "3.9" not in admitted
    wanted = [f"3.{minor}" for minor in range(floor[1], NEWEST_PYTHON[1] + 1)]
    workflow = load(CI)
    assert set(triggers(workflow)) == {"push", "pull_request"}
    fast, full = workflow["jobs"]["fast"], workflow["jobs"]["full"]
    assert fast["strategy"]["matrix"]["python"] == wanted
    assert [s["run"].strip() for s in fast["steps"] if "run" in s] == [readme_test_command()]
    assert "strategy" not in full
    assert [s["run"].strip() for s in full["steps"] if "run" in s] == [
        readme_test_command() + " tests/full"
    ]


def test_dependabot_keeps_the_actions_and_the_python_pins_current() -> None:
    config = load(ROOT / ".github" / "dependabot.yml")
    updates = {(u["package-ecosystem"], u["directory"]) for u in config["updates"]}
    assert updates == {("github-actions", "/"), ("pip", "/.github/requirements")}
    locks = {p.name for p in (ROOT / ".github" / "requirements").iterdir()}
    assert {"tool.txt", "build.txt", "build.in"} <= locks


# --- The tags: v* releases the tool, k3-kernels-v* the example kernel project. ---


def test_the_tools_tags_and_the_examples_tags_start_only_their_own_release() -> None:
    tool = triggers(load(TOOL_RELEASE))["push"]["tags"]
    example = triggers(load(RELEASE))["push"]["tags"]
    assert tool == ["v*"]
    assert example == ["k3-kernels-v*"]
    for tag, starts in ((f"v{__version__}", tool), (f"k3-kernels-v{__version__}", example)):
        other = example if starts is tool else tool
        assert any(fnmatchcase(tag, p) for p in starts), tag
        assert not any(fnmatchcase(tag, p) for p in other), tag
    # the plan's --expect-tag holds the pushed tag to the GitHub destination's template
    matrix = load(ROOT / "matrix.yaml")
    assert matrix["destinations"]["github"]["tag"] == "k3-kernels-v{version}"


def test_the_watch_verifies_the_latest_releases_and_their_provenance_every_day(
    stub_dir: Path, tmp_path: Path
) -> None:
    workflow = load(WATCH)
    on = triggers(workflow)
    assert on["schedule"] == [{"cron": "17 6 * * *"}]
    assert "workflow_dispatch" in on
    this_repository = {"GITHUB_REPOSITORY": "k3-project/cuda-wheel-release"}
    calls = [
        call
        for step in steps(WATCH)
        if step.run
        for call in run_step(step, stub_dir, tmp_path, env=this_repository)
    ]
    installs = [i for c in calls if (i := pip_install(c)) is not None]
    assert installs[:2] == [
        ["--require-hashes", "--no-deps", "-r", ".github/requirements/tool.txt"],
        ["--require-hashes", "--no-deps", "-r", ".github/requirements/build.txt"],
    ]
    assert installs[2] == ["--no-deps", "--no-build-isolation", "."]
    verify, nightly = (build_parser().parse_args(c[1:]) for c in calls if c[0] == "release")
    assert (verify.command, verify.latest, verify.require_provenance) == ("verify", 3, True)
    assert verify.channel == "release"
    # this repository's own releases: release.yml's publish job signs, release.yml itself
    assert verify.provenance_signer_workflow is None
    # then what /nightly/ serves, with no dist/ (nightly.yml publishes it)
    assert (nightly.command, nightly.channel, nightly.latest, nightly.tag) == (
        "verify", "nightly", None, [],
    )  # fmt: skip
    assert nightly.matrix == Path("matrix.yaml")
    assert load(ROOT / "matrix.yaml")["nightly"]["destination"] == "nightly"


def test_the_watch_checks_the_nightly_when_the_releases_check_failed() -> None:
    """Each check is a step of its own: a failed release check still lets the nightly's run
    and name its own failures; no tool installed, no nightly check."""
    *_, releases, nightly = job_steps(WATCH, "verify")
    assert "--latest" in releases.run
    assert "--channel nightly" in nightly.run
    condition = nightly.data["if"]
    context = TAG_PUSH.context
    assert condition_holds(condition, context, Status(success=False, failure=True))
    assert not condition_holds(condition, context, Status(success=False, cancelled=True))
    not_installed = TAG_PUSH.with_values({"steps.install.outcome": "failure"}).context
    assert not condition_holds(condition, not_installed, Status(success=False, failure=True))
    failed = Status(success=False, failure=True)
    assert not condition_holds(releases.data.get("if"), context, failed)
