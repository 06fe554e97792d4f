"""Which jobs and steps of the reusable workflow (wheels.yml) each kind of run runs, their
`if:`s evaluated for the run's event, ref and channel (tests/integration/expressions.py):
a release from a pushed tag, a nightly from a push to the default branch or a schedule,
and the dry runs of both; what each of them calls `release` with, the token each job of a
nightly holds, and where the nightly's S3 keys go.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from release import __version__
from tests.integration.workflows import (
    PUBLISH_ACTION,
    SAMPLES,
    TAG_PUSH,
    WHEELS,
    WHEELS_VERIFY,
    Run,
    job_steps,
    load,
    make_stubs,
    release_calls,
    run_step,
    steps,
    triggers,
    wheels_jobs,
)

# A nightly as its caller runs it: a push to the default branch.
NIGHTLY_PUSH = Run({
    "inputs.channel": "nightly",
    "github.ref": "refs/heads/main",
    "github.ref_type": "branch",
    "github.ref_name": "main",
    "github.workflow_ref": "acme/flash-kernels/.github/workflows/nightly.yml@refs/heads/main",
    "secrets.aws-access-key-id": "AKIASAMPLE0000000000",
    "secrets.aws-secret-access-key": "sampleSecretKey0000000000000000000000000",
})  # fmt: skip
MANUAL = {"github.event_name": "workflow_dispatch"}


@pytest.fixture(scope="module")
def stub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_stubs(tmp_path_factory.mktemp("stubs"))


@pytest.mark.parametrize(("channel", "ok"), [("release", True), ("nightly", True),
                                             ("Nightly", False), ("", False)])  # fmt: skip
def test_the_plan_job_refuses_a_channel_that_is_neither(
    channel: str, ok: bool, stub_dir: Path, tmp_path: Path
) -> None:
    (check,) = [s for s in job_steps(WHEELS, "plan") if "case" in s.run]
    assert check.index == 0, "before anything is fetched"
    calls = run_step(check, stub_dir, tmp_path, env={"CHANNEL": channel}, check=ok)
    assert calls == []


BUILT = {"plan", "build", "reproduce"}
RELEASED = BUILT  # then the caller's publish job, on the output `release`
NIGHTLY_PUBLISHED = BUILT | {"publish-nightly"}
DRY_RUN = BUILT | {"publish-dry-run"}
TAG = {"github.ref": "refs/tags/v1.2.0", "github.ref_type": "tag", "github.ref_name": "v1.2.0"}
MAIN = {"github.ref": "refs/heads/main", "github.ref_type": "branch", "github.ref_name": "main"}
BRANCH = {"github.ref": "refs/heads/fix", "github.ref_type": "branch", "github.ref_name": "fix"}
EVENTS = {
    "push": {"github.event_name": "push"},
    "schedule": {"github.event_name": "schedule"},
    "manual": {"github.event_name": "workflow_dispatch"},
}


@pytest.mark.parametrize(
    ("channel", "event", "ref", "expected"),
    [
        pytest.param(channel, event, ref, expected, id=f"{channel}-{event}-{ref['github.ref']}")
        for channel, event, ref, expected in (
            ("release", "push", TAG, RELEASED),
            ("release", "push", MAIN, DRY_RUN),
            ("release", "manual", TAG, DRY_RUN),
            ("release", "schedule", MAIN, DRY_RUN),
            ("nightly", "push", MAIN, NIGHTLY_PUBLISHED),
            ("nightly", "schedule", MAIN, NIGHTLY_PUBLISHED),
            ("nightly", "manual", MAIN, DRY_RUN),
            ("nightly", "push", BRANCH, DRY_RUN),
            ("nightly", "push", TAG, DRY_RUN),
        )
    ],
)
def test_what_publishes_a_release_is_a_pushed_tag_a_nightly_a_push_to_main_or_a_schedule(
    channel: str, event: str, ref: dict[str, str], expected: set[str]
) -> None:
    """Each job's `if:` and the plan's `publish` output, evaluated for the run; anything else
    is a dry run. A matrix.yaml with no gpu-gate runner skips the GPU job."""
    run = Run({"inputs.channel": channel, **EVENTS[event], **ref})
    ran = run.jobs(WHEELS)
    assert {name for name, result in ran.items() if result == "success"} == expected
    with_gpus = run.with_values({"steps.gpu.outputs.matrix": '{"include":[{"runner":"h"}]}'})
    ran = with_gpus.jobs(WHEELS)
    assert {name for name, result in ran.items() if result == "success"} == expected | {"gpu"}


def test_the_output_release_is_true_for_a_release_from_a_pushed_tag_only() -> None:
    value = triggers(load(WHEELS))["workflow_call"]["outputs"]["release"]["value"]
    assert value == "${{ jobs.plan.outputs.release }}"
    given = wheels_jobs()["plan"]["outputs"]["release"]
    assert TAG_PUSH.fill(given) == "true"
    for other in (MANUAL, {"inputs.channel": "nightly"}, MAIN):
        assert TAG_PUSH.with_values(other).fill(given) == "false", other


def test_a_release_without_an_index_is_verified_with_no_pages_deployed() -> None:
    ran = TAG_PUSH.with_values({"inputs.index": False}).jobs(WHEELS_VERIFY)
    assert (ran["index"], ran["verify"]) == ("skipped", "success")
    ran = TAG_PUSH.jobs(WHEELS_VERIFY)
    assert (ran["index"], ran["verify"]) == ("success", "success")


def test_a_nightly_and_a_release_of_one_ref_do_not_wait_for_each_other() -> None:
    group = load(WHEELS)["concurrency"]["group"]
    assert load(WHEELS)["concurrency"]["cancel-in-progress"] is False
    nightly = NIGHTLY_PUSH.fill(group)
    assert nightly != NIGHTLY_PUSH.with_values({"inputs.channel": "release"}).fill(group)
    assert nightly == NIGHTLY_PUSH.with_values(EVENTS["schedule"]).fill(group)


GPUS = {"steps.gpu.outputs.matrix": '{"include":[{"runner":"self-hosted/linux/h200"}]}'}
BUILDS = {"plan": ["matrix", "matrix", "plan"], "build": ["build", "plan"],
          "reproduce": ["build"], "gpu": ["gpu-gate"]}  # fmt: skip
RUNS = {
    "release": (TAG_PUSH, BUILDS),
    "release-dry-run": (TAG_PUSH.with_values(MANUAL), {**BUILDS, "publish-dry-run": ["publish"]}),
    "nightly": (NIGHTLY_PUSH, {**BUILDS, "publish-nightly": ["publish"]}),
    "nightly-dry-run": (NIGHTLY_PUSH.with_values(MANUAL), {**BUILDS, "publish-dry-run": ["plan"]}),
}


def calls_by_job(run: Run, stub_dir: Path, tmp_path: Path) -> dict[str, list[argparse.Namespace]]:
    """The `release` calls of every step that `run` runs, by job."""
    found: dict[str, list[argparse.Namespace]] = {}
    for step in run.steps(WHEELS):
        calls = release_calls([step], stub_dir, tmp_path, run=run)
        if calls:
            found.setdefault(step.job, []).extend(calls)
    return found


@pytest.mark.parametrize("name", list(RUNS))
def test_each_run_calls_release_on_its_channel_in_its_jobs(
    name: str, stub_dir: Path, tmp_path: Path
) -> None:
    """A release runs as it did before the nightly channel: every call on the release
    channel (the default), the plan held to the tag; a nightly's every call on the nightly
    channel, with no tag to expect (a nightly caller could run from a tag's ref too)."""
    run, expected = RUNS[name]
    run = run.with_values(GPUS)
    found = calls_by_job(run, stub_dir, tmp_path)
    assert {job: [a.command for a in calls] for job, calls in found.items()} == expected
    channel = "nightly" if name.startswith("nightly") else "release"
    for calls in found.values():
        for args in calls:
            assert getattr(args, "channel", channel) == channel, args
            assert args.matrix == Path("matrix.yaml")
    (build,) = [a for a in found["build"] if a.command == "build"]
    # a release's build jobs build the sdist (the job of its cell does); a nightly has none
    assert build.sdist is (channel == "release")
    (plan,) = [a for a in found["plan"] if a.command == "plan"]
    # a release's runs are of its tag (a manual one too); a nightly expects none
    assert plan.expect_tag == (None if channel == "nightly" else f"v{__version__}")
    if "publish-nightly" in found:
        (publish,) = found["publish-nightly"]
        assert (publish.dry_run, publish.dist) == (False, Path("dist"))
    if name == "release-dry-run":
        (dry,) = found["publish-dry-run"]
        assert dry.dry_run is True
    if name == "nightly-dry-run":  # read over HTTP from where the channel is served: no keys
        (dry,) = found["publish-dry-run"]
        assert dry.dist == Path("dist")


def test_a_nightly_run_from_a_tag_expects_no_tag(stub_dir: Path, tmp_path: Path) -> None:
    run = NIGHTLY_PUSH.with_values(TAG)
    (step,) = [s for s in job_steps(WHEELS, "plan") if "release plan" in s.run]
    (plan,) = release_calls([step], stub_dir, tmp_path, run=run)
    assert (plan.channel, plan.expect_tag) == ("nightly", None)


def test_a_nightly_signs_attests_and_deploys_nothing() -> None:
    """No PyPI, GitHub Release or Pages step is in wheels.yml: a release's are the caller's
    publish job (actions/publish) and wheels-verify.yml's; a nightly calls neither."""
    release_only = {
        "actions/attest-build-provenance", "actions/upload-pages-artifact", "actions/deploy-pages",
    }  # fmt: skip
    for run in (TAG_PUSH, NIGHTLY_PUSH, NIGHTLY_PUSH.with_values(EVENTS["schedule"])):
        ran = run.with_values(GPUS).steps(WHEELS)
        uses = {s.uses.split("@")[0] for s in ran if s.uses}
        assert not uses & release_only
        assert [s.where for s in ran if "pypi_attestations" in s.run] == []
        if run is not TAG_PUSH:
            assert "actions/cache" not in uses, "a published nightly builds from empty caches"
    published = {s.uses.split("@")[0] for s in steps(PUBLISH_ACTION, WHEELS_VERIFY) if s.uses}
    assert release_only <= published


@pytest.mark.parametrize("name", ["nightly", "nightly-dry-run"])
def test_the_jobs_a_nightly_runs_hold_a_read_only_token(name: str) -> None:
    run = RUNS[name][0].with_values(GPUS)
    ran = [job for job, result in run.jobs(WHEELS).items() if result == "success"]
    assert len(ran) == 5
    for job in ran:
        assert wheels_jobs()[job]["permissions"] == {"contents": "read"}, job


def test_only_the_step_that_publishes_the_nightly_gets_the_s3_keys(
    stub_dir: Path, tmp_path: Path
) -> None:
    given = [s for s in steps(WHEELS) if "secrets.aws-" in str(s.data.get("env", {}))]
    (publish,) = given
    assert publish.job == "publish-nightly"
    assert "environment" not in wheels_jobs()["publish-nightly"], "a nightly waits for no reviewer"
    env = {k: NIGHTLY_PUSH.fill(v) for k, v in publish.data["env"].items()}
    assert env["AWS_ACCESS_KEY_ID"] == "AKIASAMPLE0000000000"
    assert env["AWS_SECRET_ACCESS_KEY"] == "sampleSecretKey0000000000000000000000000"
    assert env["GITHUB_TOKEN"] == SAMPLES["github.token"]
    # the matrix and the project (matrix.yaml's nightly section, the version) come from the
    # checkout, of the commit the build jobs built
    job = job_steps(WHEELS, "publish-nightly")
    assert job[0].uses.startswith("actions/checkout@")
    assert job[0].data["with"] == {"persist-credentials": False}
    (args,) = release_calls([publish], stub_dir, tmp_path, run=NIGHTLY_PUSH)
    assert (args.command, args.channel) == ("publish", "nightly")
