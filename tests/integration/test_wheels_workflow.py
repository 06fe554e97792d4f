"""The reusable workflows (wheels.yml, wheels-verify.yml) and the publish action
(actions/publish) as another repository's caller uses them, for a release or a nightly, and
the tool's own release (tool-release.yml): the inputs, the jobs in the order of a release,
what each job runs (every `run:` step executed against stubs, every `release`
call parsed by the real CLI), the matrix fields the jobs read, provenance, and the dry
runs. Which jobs and steps each kind of run runs: test_wheels_runs.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from release import __version__
from release.commands.matrix import github_matrix
from release.init.render import render_workflow
from release.matrix import matrix_from_text
from release.provenance.attestation import attestation_path
from release.publish.run import COMPANIONS_DIR
from tests.integration.workflows import (
    CALLER,
    NIGHTLY,
    NIGHTLY_CALLER,
    PUBLISH_ACTION,
    RELEASE,
    ROOT,
    SAMPLES,
    STUB_DIGEST,
    TAG_PUSH,
    TOOL_RELEASE,
    TOOL_REPOSITORY,
    WHEELS,
    WHEELS_VERIFY,
    Run,
    Step,
    allowed,
    job_steps,
    load,
    make_stubs,
    release_calls,
    resolve,
    run_step,
    steps,
    triggers,
    wheels_jobs,
)

BIN = Path(sys.executable).parent
ORDER = ["plan", "build", "reproduce", "gpu", "publish-dry-run", "publish-nightly"]
COMMIT = "0123456789abcdef" * 2 + "01234567"  # a commit the caller pins the tool to
INPUTS = {
    "matrix": ("string", "matrix.yaml", False),
    "tool-version": ("string", None, True),
    "gpu-runner-labels": ("string", "", False),
    "retention-days": ("number", 7, False),
    "channel": ("string", "release", False),
    "token-secret": ("string", "", False),
}
SECRETS = ("aws-access-key-id", "aws-secret-access-key", "destination-token")


@pytest.fixture(scope="module")
def stub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_stubs(tmp_path_factory.mktemp("stubs"))


# --- Called from another repository. ---


def init_text(token_secret: str | None = None) -> str:
    return render_workflow(__version__, "matrix.yaml", COMMIT, token_secret)


@pytest.fixture(scope="module")
def init_caller(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The caller `release init` writes (release/init/templates/release.yml)."""
    path = tmp_path_factory.mktemp("init") / "release.yml"
    path.write_text(init_text(), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def init_token_caller(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same with `--pypi-token-secret PYPI_API_TOKEN`."""
    path = tmp_path_factory.mktemp("init-token") / "release.yml"
    path.write_text(init_text("PYPI_API_TOKEN"), encoding="utf-8")
    return path


def check_called(job: dict[str, Any], called: Path) -> None:
    """The inputs a caller gives are declared, the required ones given, and its grant holds
    every job of the called workflow (GitHub checks skipped jobs too)."""
    declared = triggers(load(called))["workflow_call"]
    given = job.get("with", {})
    assert set(given) <= set(declared["inputs"]), "an input the workflow does not declare"
    for name, spec in declared["inputs"].items():
        if spec.get("required"):
            assert name in given, f"misses the required input {name}"
    assert isinstance(given.get("retention-days", 7), int)
    assert set(job.get("secrets", {})) <= set(declared.get("secrets", {}))
    assert job.get("secrets") != "inherit"
    granted = job["permissions"]
    for name, called_job in load(called)["jobs"].items():
        for scope, level in called_job["permissions"].items():
            assert granted.get(scope) == "write" or granted.get(scope) == level, (name, scope)
    assert re.fullmatch(r"\d+\.\d+\.\d+", given["tool-version"])


def check_caller(caller: Path) -> dict[str, Any]:
    """A release's caller: build (wheels.yml, read-only), publish (a job of the caller that
    uses actions/publish, with what trusted publishing needs), verify (wheels-verify.yml)."""
    jobs: dict[str, Any] = load(caller)["jobs"]
    assert list(jobs) == ["build", "publish", "verify"]
    build, publish, verify = jobs["build"], jobs["publish"], jobs["verify"]
    assert resolve(build["uses"]) == WHEELS
    assert resolve(verify["uses"]) == WHEELS_VERIFY
    check_called(build, WHEELS)
    check_called(verify, WHEELS_VERIFY)
    assert build["permissions"] == {"contents": "read"}
    assert build["with"].get("channel", "release") == "release"
    assert publish["needs"] == "build"
    assert publish["if"] == "needs.build.outputs.release == 'true'"
    assert publish["environment"]["name"] == "release"
    assert publish["permissions"] == {
        "contents": "write", "id-token": "write", "attestations": "write",
    }  # fmt: skip
    (action,) = [s for s in publish["steps"] if s.get("id") == "publish"]
    assert resolve(action["uses"]) == PUBLISH_ACTION
    declared = load(PUBLISH_ACTION)["inputs"]
    assert set(action.get("with", {})) <= set(declared)
    assert publish["outputs"]["index"] == "${{ steps.publish.outputs.index }}"
    assert verify["needs"] == "publish"
    assert verify["with"]["index"] == "${{ needs.publish.outputs.index == 'true' }}"
    for key, default in (("tool-version", None), ("matrix", "matrix.yaml")):
        assert build["with"].get(key, default) == verify["with"].get(key, default), key
    declared_outputs = triggers(load(WHEELS))["workflow_call"]["outputs"]
    assert declared_outputs["release"]["value"] == "${{ jobs.plan.outputs.release }}"
    return jobs


@pytest.mark.parametrize("caller", ["another-project", "this-repo", "init", "init-token"])
def test_a_caller_resolves_to_these_files_and_grants_what_their_jobs_need(
    caller: str, init_caller: Path, init_token_caller: Path
) -> None:
    path = {"another-project": CALLER, "this-repo": RELEASE, "init": init_caller,
            "init-token": init_token_caller}[caller]  # fmt: skip
    jobs = check_caller(path)
    (action,) = [s for s in jobs["publish"]["steps"] if s.get("id") == "publish"]
    token = action.get("with", {}).get("pypi-token")
    if caller in ("another-project", "init-token"):
        assert token == "${{ secrets.PYPI_API_TOKEN }}"
    else:  # trusted publishing: no token anywhere
        assert token is None
        assert "secrets." not in path.read_text(encoding="utf-8").replace("secrets.NAME", "")
    if caller != "another-project":  # the tool of this commit, as released
        assert jobs["build"]["with"]["tool-version"] == __version__


def test_an_init_caller_with_a_destination_token_hands_it_to_the_action_and_the_readers(
    tmp_path: Path,
) -> None:
    """`release init --destination-token-secret GH_PAT_FOR_WHL_RELEASE` (sgl-project's
    secret for sgl-project/whl): the publish action gets the secret and its name, the
    build's and the verify's reusable workflows the same for their reads, nothing more."""
    path = tmp_path / "release.yml"
    path.write_text(
        render_workflow(
            __version__, "matrix.yaml", COMMIT, "PYPI_API_TOKEN",
            destination_token_secret=SECRET_NAME,
        ),
        encoding="utf-8",
    )  # fmt: skip
    jobs = check_caller(path)
    secret = f"${{{{ secrets.{SECRET_NAME} }}}}"
    (action,) = [s for s in jobs["publish"]["steps"] if s.get("id") == "publish"]
    assert action["with"] == {
        "pypi-token": "${{ secrets.PYPI_API_TOKEN }}",
        "token": secret,
        "token-secret": SECRET_NAME,
    }
    assert set(action["with"]) <= set(load(PUBLISH_ACTION)["inputs"])
    for name in ("build", "verify"):
        assert jobs[name]["with"]["token-secret"] == SECRET_NAME, name
        assert jobs[name]["secrets"] == {"destination-token": secret}, name
    assert "secrets: inherit" not in path.read_text(encoding="utf-8")
    linted = subprocess.run(
        [str(BIN / "actionlint"), "-shellcheck=", "-pyflakes=", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
    audited = subprocess.run(
        [str(BIN / "zizmor"), "--offline", str(path)], capture_output=True, text=True, check=False
    )
    assert audited.returncode == 0, audited.stdout + audited.stderr


@pytest.mark.parametrize("caller", ["another-project", "this-repo"])
def test_a_nightly_caller_resolves_to_wheels_yml_with_the_nightly_channel(caller: str) -> None:
    """On a push to main and on a schedule, with the channel's S3 keys passed by name; the
    grant is contents: read, what every job of wheels.yml asks for."""
    path = {"another-project": NIGHTLY_CALLER, "this-repo": NIGHTLY}[caller]
    (job,) = load(path)["jobs"].values()
    assert resolve(job["uses"]) == WHEELS
    check_called(job, WHEELS)
    assert job["permissions"] == {"contents": "read"}
    assert job["with"]["channel"] == "nightly"
    assert set(job["secrets"]) == {"aws-access-key-id", "aws-secret-access-key"}
    for value in job["secrets"].values():
        assert re.fullmatch(r"\$\{\{ secrets\.\w+ \}\}", value), value
    on = triggers(load(path))
    assert set(on) == {"push", "schedule", "workflow_dispatch"}
    assert on["push"] == {"branches": ["main"]}
    assert len(on["schedule"]) == 1
    if caller == "this-repo":
        assert job["with"]["tool-version"] == __version__


@pytest.mark.parametrize("token", [None, "PYPI_API_TOKEN"])
def test_the_caller_release_init_writes_passes_the_linters_zizmor_too(
    token: str | None, tmp_path: Path
) -> None:
    """check-jsonschema, actionlint and zizmor --offline (its default persona) find nothing;
    every `uses:` is the tool's, by commit, with the version as a comment."""
    caller = tmp_path / ".github" / "workflows" / "release.yml"
    caller.parent.mkdir(parents=True)
    text = init_text(token)
    caller.write_text(text, encoding="utf-8")
    for command in (
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows"],
        [str(BIN / "actionlint"), "-shellcheck=", "-pyflakes="],
        [str(BIN / "zizmor"), "--offline", "--format", "json"],
    ):
        result = subprocess.run(
            [*command, str(caller)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr
    for persona in ("regular", "pedantic"):  # pedantic: its lows and informationals too
        found = subprocess.run(
            [str(BIN / "zizmor"), "--offline", "--persona", persona, "--format", "json",
             str(caller)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert found.stdout.strip() == "[]", (persona, found.stdout)
    uses = [
        line.strip() for line in text.splitlines() if line.strip().startswith(("uses:", "- uses:"))
    ]
    assert len(uses) == 3
    for line in uses:
        assert re.fullmatch(
            rf"(- )?uses: {TOOL_REPOSITORY}/[\w./-]+@{COMMIT} # v{re.escape(__version__)}", line
        ), line


def test_a_caller_pinned_by_tag_is_what_zizmor_reports(tmp_path: Path) -> None:
    """The same linter catches what it is here for: the caller with the tag (what init
    writes where it cannot know the commit, with a TODO) is `unpinned-uses`."""
    caller = tmp_path / "release.yml"
    caller.write_text(render_workflow(__version__, "matrix.yaml", None), encoding="utf-8")
    assert f"TODO: pin each `uses:` by the commit of tag v{__version__}" in caller.read_text()
    result = subprocess.run(
        [str(BIN / "zizmor"), "--offline", "--format", "json", str(caller)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert {f["ident"] for f in json.loads(result.stdout)} == {"unpinned-uses"}


@pytest.mark.parametrize("path", [WHEELS, WHEELS_VERIFY])
def test_a_called_workflow_refuses_a_tool_version_of_another_release(
    path: Path, stub_dir: Path, tmp_path: Path
) -> None:
    """Dependabot moves the `uses:` pin, not tool-version: the first step of the run stops
    on the mismatch (exit 2, one line) before anything is fetched or built."""
    assert load(path)["env"]["WORKFLOW_TOOL_VERSION"] == __version__
    job = "plan" if path == WHEELS else "verify"
    (check,) = [s for s in job_steps(path, job) if "WORKFLOW_TOOL_VERSION" in s.run]
    assert check.index == (1 if path == WHEELS else 0)
    assert run_step(check, stub_dir, tmp_path) == []
    run_step(check, stub_dir, tmp_path, env={"TOOL_VERSION": "9.9.9"}, check=False)


def test_the_inputs_are_the_six_a_caller_gives_and_every_secret_is_optional() -> None:
    declared = triggers(load(WHEELS))["workflow_call"]
    assert set(declared) == {"inputs", "outputs", "secrets"}
    found = {
        name: (spec["type"], spec.get("default"), spec.get("required", False))
        for name, spec in declared["inputs"].items()
    }
    assert found == INPUTS
    assert tuple(declared["secrets"]) == SECRETS
    for name, spec in declared["secrets"].items():
        assert spec == {"description": spec["description"], "required": False}, name


def test_the_jobs_run_in_the_order_of_a_release() -> None:
    found = wheels_jobs()
    assert list(found) == ORDER
    for position, name in enumerate(ORDER):
        needs = found[name].get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        assert set(needs) <= set(ORDER[:position]), name
    assert found["build"]["needs"] == "plan"
    assert found["reproduce"]["needs"] == ["plan", "build"]
    assert found["gpu"]["needs"] == ["plan", "build", "reproduce"]
    for name in ("publish-dry-run", "publish-nightly"):
        assert found[name]["needs"] == ["plan", "build", "reproduce", "gpu"]
        assert "!contains(needs.*.result, 'failure')" in found[name]["if"]
        assert "needs.reproduce.result == 'success'" in found[name]["if"]
    after = load(WHEELS_VERIFY)["jobs"]
    assert list(after) == ["index", "verify"]
    assert after["verify"]["needs"] == "index"


def test_builds_and_reproductions_run_where_release_matrix_says(
    stub_dir: Path, tmp_path: Path
) -> None:
    found = wheels_jobs()
    for name in ("build", "reproduce"):
        job = found[name]
        assert job["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
        assert job["runs-on"] == "${{ matrix.runs_on }}"
        assert job["container"] == {"image": "${{ matrix.container }}"}
    (step,) = [s for s in job_steps(WHEELS, "plan") if s.data.get("id") == "matrix"]
    (args,) = release_calls([step], stub_dir, tmp_path)
    assert (args.command, args.format, args.per, args.matrix) == (
        "matrix", "github", "arch", Path("matrix.yaml"),
    )  # fmt: skip
    # every field the two jobs read is in every entry `release matrix` gives them
    text = WHEELS.read_text(encoding="utf-8")
    expressions = re.findall(r"\$\{\{(.*?)\}\}", text)
    fields = {f for e in expressions for f in re.findall(r"(?<![\w.])matrix\.(\w+)", e)}
    fields -= {"runner", "labels"}  # the GPU job's, from --format gpu
    assert {"runs_on", "container", "cuda_home", "pythons", "id", "cuda", "arch"} <= fields
    path = ROOT / "matrix.yaml"
    shipped = matrix_from_text(path.read_text(encoding="utf-8"), path)
    for entry in github_matrix(shipped.cells, per="arch")["include"]:
        assert fields <= set(entry), fields - set(entry)


def test_a_matrix_release_refuses_stops_the_plan_job(stub_dir: Path, tmp_path: Path) -> None:
    """`release matrix` exits 2 or 3 with one line (bad labels, a toolkit image with no
    digest): the step fails, instead of handing the jobs an empty matrix."""
    for step in (s for s in job_steps(WHEELS, "plan") if s.data.get("id") in ("matrix", "gpu")):
        tmp = tmp_path / str(step.index)
        tmp.mkdir()
        run_step(step, stub_dir, tmp, env={"STUB_FAIL": "release"}, check=False)
        assert not (tmp / "output").exists(), step.where


def test_every_run_step_calls_only_release_installs_and_plumbing(
    stub_dir: Path, tmp_path: Path
) -> None:
    found = list(steps(WHEELS, WHEELS_VERIFY, PUBLISH_ACTION))
    commands = {a.command for a in release_calls(found, stub_dir, tmp_path)}
    assert commands == {"matrix", "plan", "build", "gpu-gate", "publish", "verify"}


def test_the_tool_is_installed_from_its_attested_hash_locked_release_file(
    stub_dir: Path, tmp_path: Path
) -> None:
    (fetch,) = [s for s in job_steps(WHEELS, "plan") if "gh release download" in s.run]
    calls = run_step(fetch, stub_dir, tmp_path)
    name = f"cuda-wheel-release-{__version__}-requirements.txt"
    download, verify = (c for c in calls if c[0] == "gh")
    assert download[:3] == ["gh", "release", "download"]
    assert download[3] == f"v{__version__}"
    assert download[download.index("--repo") + 1] == TOOL_REPOSITORY
    assert download[download.index("--pattern") + 1] == name
    assert verify[:3] == ["gh", "attestation", "verify"]
    assert verify[3] == str(tmp_path / "tool" / name)
    assert verify[verify.index("--repo") + 1] == TOOL_REPOSITORY
    assert verify[verify.index("--signer-workflow") + 1] == (
        f"{TOOL_REPOSITORY}/.github/workflows/tool-release.yml"
    )
    assert [
        "mv",
        str(tmp_path / "tool" / name),
        str(tmp_path / "tool" / "requirements.txt"),
    ] in calls
    # every other job that runs the tool installs that file, which the plan job handed on
    for path, name_ in [
        *((WHEELS, n) for n in wheels_jobs() if n != "plan"),
        (WHEELS_VERIFY, "verify"),
        (PUBLISH_ACTION, "publish"),
    ]:
        downloads = [s for s in job_steps(path, name_) if "download-artifact" in s.uses]
        assert downloads[0].data["with"]["name"] == "tool-requirements", name_


def test_the_gpu_gate_runs_on_the_labels_the_caller_gives(stub_dir: Path, tmp_path: Path) -> None:
    gpu = wheels_jobs()["gpu"]
    assert gpu["runs-on"] == "${{ matrix.labels }}"
    assert gpu["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.gpu) }}"
    assert "needs.plan.outputs.gpu != '{\"include\":[]}'" in gpu["if"]
    (step,) = [s for s in job_steps(WHEELS, "plan") if s.data.get("id") == "gpu"]
    (given,) = release_calls([step], stub_dir, tmp_path / "given")
    assert given.runner_labels == SAMPLES["inputs.gpu-runner-labels"]
    (default,) = release_calls([step], stub_dir, tmp_path / "none", env={"LABELS": ""})
    assert (default.format, default.runner_labels) == ("gpu", None)
    (gate,) = release_calls(job_steps(WHEELS, "gpu"), stub_dir, tmp_path / "gate")
    assert (gate.command, gate.runner, gate.dist) == (
        "gpu-gate", SAMPLES["matrix.runner"], Path("dist"),
    )  # fmt: skip


def test_nothing_is_published_before_a_second_runner_reproduced_every_wheel(
    stub_dir: Path, tmp_path: Path
) -> None:
    assert not any(s.uses.startswith("actions/cache@") for s in job_steps(WHEELS, "reproduce"))
    (rebuild,) = release_calls(job_steps(WHEELS, "reproduce"), stub_dir, tmp_path)
    assert rebuild.compare == Path("dist/manifest-12.9-aarch64.json")
    assert (rebuild.cuda, rebuild.arch) == (["12.9"], ["aarch64"])
    (built, _summary) = release_calls(job_steps(WHEELS, "build"), stub_dir, tmp_path / "b")
    assert (built.command, built.compare, built.out) == ("build", None, Path("dist"))
    (download,) = [
        s for s in job_steps(WHEELS, "reproduce") if s.data.get("with", {}).get("path") == "dist"
    ]
    assert download.data["with"]["name"] == "dist-${{ matrix.id }}"


def test_verify_requires_provenance_signed_from_the_callers_workflow(
    stub_dir: Path, tmp_path: Path
) -> None:
    """Every attestation is signed in the caller's publish job: by the caller's workflow file
    itself, so no other signer is named."""
    (args,) = release_calls(job_steps(WHEELS_VERIFY, "verify"), stub_dir, tmp_path)
    assert (args.command, args.dist, args.require_provenance) == ("verify", Path("dist"), True)
    assert args.provenance_workflow == ".github/workflows/release.yml"
    assert args.provenance_signer_workflow is None


# --- A destination in another repository: its token, in the variable token-secret names. ---

SECRET_NAME = "GH_PAT_FOR_WHL_RELEASE"  # sgl-project's, for sgl-project/whl
OTHER_TOKEN = "github_pat_" + "0therRep0" * 4
SEEN = ("GITHUB_TOKEN", SECRET_NAME, "DESTINATION_TOKEN")
ENV_STUB = """#!{python}
import json, os, sys
with open(os.environ["STUB_LOG"], "a", encoding="utf-8") as log:
    seen = {{name: os.environ.get(name) for name in {names!r}}}
    log.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:], seen]) + "\\n")
"""


@pytest.fixture(scope="module")
def env_stub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stubs, with a `release` that records the variables a token could be in."""
    directory = make_stubs(tmp_path_factory.mktemp("env-stubs"))
    (directory / "release").write_text(ENV_STUB.format(python=sys.executable, names=SEEN))
    return directory


def release_environment(step: Step, stubs: Path, tmp: Path, run: Run) -> dict[str, Any]:
    """What `release` saw of the token variables when `step` called it (once)."""
    (call,) = [c for c in run_step(step, stubs, tmp, run=run) if c[0] == "release"]
    seen: object = call[-1]  # the stub logs it after the arguments
    assert isinstance(seen, dict)
    return seen


def test_the_publish_action_hands_the_other_repositorys_token_to_its_variable(
    env_stub_dir: Path, tmp_path: Path
) -> None:
    (upload,) = [s for s in steps(PUBLISH_ACTION) if "release publish" in s.run]
    given = TAG_PUSH.with_values({"inputs.token": OTHER_TOKEN, "inputs.token-secret": SECRET_NAME})
    assert release_environment(upload, env_stub_dir, tmp_path, given) == {
        "GITHUB_TOKEN": SAMPLES["github.token"],
        SECRET_NAME: OTHER_TOKEN,
        "DESTINATION_TOKEN": None,
    }
    assert OTHER_TOKEN not in upload.run
    # without one, release sees the job's token alone
    assert release_environment(upload, env_stub_dir, tmp_path, TAG_PUSH) == {
        "GITHUB_TOKEN": SAMPLES["github.token"],
        SECRET_NAME: None,
        "DESTINATION_TOKEN": None,
    }
    declared = load(PUBLISH_ACTION)["inputs"]
    assert (declared["token"]["default"], declared["token-secret"]["default"]) == ("", "")


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"inputs.token": OTHER_TOKEN}, "give token and token-secret together"),
        ({"inputs.token-secret": SECRET_NAME}, "give token and token-secret together"),
        ({"inputs.token": OTHER_TOKEN, "inputs.token-secret": "PATH"}, "is not a secret's name"),
        ({"inputs.token": OTHER_TOKEN, "inputs.token-secret": "A-B"}, "is not a secret's name"),
    ],
)
def test_the_publish_action_refuses_half_a_token_or_a_name_it_cannot_set(
    env_stub_dir: Path, tmp_path: Path, values: dict[str, str], said: str
) -> None:
    (upload,) = [s for s in steps(PUBLISH_ACTION) if "release publish" in s.run]
    env = {"STUB_LOG": str(tmp_path / "calls.jsonl")}
    filled = {k: TAG_PUSH.with_values(values).fill(v) for k, v in upload.data["env"].items()}
    done = subprocess.run(
        ["/bin/bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", upload.run],
        env={"PATH": str(env_stub_dir), **env, **filled},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert said in done.stdout
    assert OTHER_TOKEN not in done.stdout + done.stderr
    assert not (tmp_path / "calls.jsonl").exists(), "release publish never ran"


@pytest.mark.parametrize(
    ("workflow", "job", "words"),
    [
        (WHEELS, "plan", "release plan"),
        (WHEELS, "publish-dry-run", "release publish --dist dist --dry-run"),
        (WHEELS_VERIFY, "verify", "release verify"),
    ],
)
def test_the_jobs_that_read_the_destinations_get_the_token_in_its_variable(
    env_stub_dir: Path, tmp_path: Path, workflow: Path, job: str, words: str
) -> None:
    (step,) = [s for s in job_steps(workflow, job) if words in s.run]
    given = TAG_PUSH.with_values(
        {"secrets.destination-token": OTHER_TOKEN, "inputs.token-secret": SECRET_NAME}
    )
    assert release_environment(step, env_stub_dir, tmp_path, given)[SECRET_NAME] == OTHER_TOKEN
    assert release_environment(step, env_stub_dir, tmp_path, TAG_PUSH)[SECRET_NAME] is None
    # a fork's pull request has no secrets: the job's own token reads
    forked = TAG_PUSH.with_values({"inputs.token-secret": SECRET_NAME})
    assert release_environment(step, env_stub_dir, tmp_path, forked)[SECRET_NAME] is None
    # no job that builds sees it
    for other in (s for s in steps(workflow) if s.job not in ("plan", "publish-dry-run", "verify")):
        assert "destination-token" not in json.dumps(other.data), other.where


# --- Provenance: PEP 740 attestations for PyPI, GitHub artifact attestations for all. ---


def test_every_wheel_is_signed_pep_740_before_release_publish_sends_them(
    stub_dir: Path, tmp_path: Path
) -> None:
    job = list(steps(PUBLISH_ACTION))
    (sign,) = [s for s in job if "pypi_attestations" in s.run]
    (upload,) = [s for s in job if "release publish" in s.run]
    assert sign.index < upload.index
    dist = tmp_path / "dist"
    dist.mkdir()
    plain = "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    labelled = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"
    sdist = "k3_kernels-0.1.0.tar.gz"
    for name in (plain, labelled, sdist, "k3_kernels-0.1.0-py3-none-any.whl.metadata"):
        (dist / name).write_bytes(b"wheel")
    assert run_step(sign, stub_dir, tmp_path) == [
        ["python", "-m", "pypi_attestations", "sign", f"dist/{labelled}", f"dist/{plain}",
         f"dist/{sdist}"]
    ]  # fmt: skip
    assert attestation_path(dist / plain).name == f"{plain}.publish.attestation"
    # PyPI takes attestations only from trusted publishing: with a token, the GitHub-hosted
    # (local label) wheels only, never the sdist (PyPI's alone)
    assert run_step(sign, stub_dir, tmp_path, env={"TOKEN_UPLOAD": "true"}) == [
        ["python", "-m", "pypi_attestations", "sign", f"dist/{labelled}"]
    ]
    (upload_env,) = [s.data["env"] for s in job if "release publish" in s.run]
    assert upload_env["TWINE_API_KEY"] == "${{ inputs.pypi-token }}"
    assert sign.data["env"]["TOKEN_UPLOAD"] == "${{ inputs.pypi-token != '' }}"
    for path in list(dist.iterdir()):
        path.unlink()
    assert run_step(sign, stub_dir, tmp_path) == [], "no wheel: nothing to sign"


def test_build_provenance_covers_every_wheel_companion_and_index_file(
    stub_dir: Path, tmp_path: Path
) -> None:
    job = list(steps(PUBLISH_ACTION))
    (attest,) = [s for s in job if s.uses.startswith("actions/attest")]
    assert attest.uses.split("@")[0] == "actions/attest-build-provenance"
    (upload,) = [s for s in job if "release publish" in s.run]
    assert attest.index > upload.index, "the companion files and the index exist only then"
    (args,) = release_calls([upload], stub_dir, tmp_path)
    assert attest.data["with"]["subject-path"].split() == [
        f"{args.dist}/*.whl",
        f"{args.dist}/{COMPANIONS_DIR}/*",
        f"{args.index_dir}/**",
    ]
    (pages,) = [s for s in job if "upload-pages-artifact" in s.uses]
    assert Path(pages.data["with"]["path"]) == args.index_dir
    assert pages.data["if"] == "steps.index.outputs.pages == 'true'"
    elsewhere = [
        s.where for s in steps(WHEELS, WHEELS_VERIFY, PUBLISH_ACTION) if "attest" in s.uses
    ]
    assert elsewhere == [attest.where]


def test_artifacts_keep_for_the_days_the_caller_gives() -> None:
    uploads = [s for s in steps(WHEELS, PUBLISH_ACTION) if "upload-" in s.uses]
    assert len(uploads) >= 6
    for step in uploads:
        assert step.data["with"]["retention-days"] == "${{ inputs.retention-days }}", step.where


# --- The tool's own release. ---


def test_the_tool_release_refuses_a_tag_that_is_not_v_and_its_version(
    stub_dir: Path, tmp_path: Path
) -> None:
    (check,) = [s for s in job_steps(TOOL_RELEASE, "build") if s.data.get("id") == "version"]
    assert run_step(check, stub_dir, tmp_path) == [["hatchling", "version"]]
    assert (tmp_path / "output").read_text(encoding="utf-8") == f"version={__version__}\n"
    run_step(check, stub_dir, tmp_path, env={"TAG": "v9.9.9"}, check=False)
    run_step(check, stub_dir, tmp_path, env={"TAG": f"k3-kernels-v{__version__}"}, check=False)
    run_step(check, stub_dir, tmp_path, env={"TAG": ""})  # a dry run: any ref


def test_the_tool_release_builds_checks_and_locks_its_distributions(
    stub_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "release" / "init").mkdir(parents=True)  # the checkout's
    calls = [
        c
        for s in job_steps(TOOL_RELEASE, "build")
        if s.run
        for c in run_step(s, stub_dir, tmp_path)
    ]
    for call in calls:
        assert allowed(call), call
    assert ["python", "-m", "pip", "install", "--require-hashes", "--no-deps", "-r",
            ".github/requirements/build.txt"] in calls  # fmt: skip
    assert ["python", "-m", "build", "--no-isolation", "--outdir", "dist"] in calls
    # the commit goes into the wheel before the build (release/init/toolref.py reads it)
    assert calls.index(["git", "rev-parse", "HEAD"]) < calls.index(
        ["python", "-m", "build", "--no-isolation", "--outdir", "dist"]
    )
    assert (tmp_path / "release" / "init" / "commit.txt").exists()
    assert ["twine", "check", "--strict", "dist/*"] in calls
    assert any(c[0] == "check-wheel-contents" for c in calls)
    # the requirements file ends with the tool's own wheel, by its sha256
    locked = tmp_path / "dist" / f"cuda-wheel-release-{__version__}-requirements.txt"
    assert locked.read_text(encoding="utf-8").splitlines()[-1] == (
        f"cuda-wheel-release=={__version__} --hash=sha256:{STUB_DIGEST}"
    )
    installs = [c for c in calls if c[0] == "pip"]
    assert installs == [[
        "pip", "install", "--require-hashes", "--no-deps", "--find-links", "dist",
        "-r", f"dist/cuda-wheel-release-{__version__}-requirements.txt",
    ]]  # fmt: skip
    assert ["release", "--version"] in calls


def test_the_tool_release_publishes_only_from_a_tag_pypi_first() -> None:
    tool = load(TOOL_RELEASE)
    assert set(triggers(tool)) == {"push", "workflow_dispatch"}
    found = tool["jobs"]
    assert list(found) == ["build", "pypi", "github-release"]
    for name in ("pypi", "github-release"):
        assert found[name]["if"] == "github.event_name == 'push' && github.ref_type == 'tag'"
    assert found["github-release"]["needs"] == ["build", "pypi"]
    assert found["pypi"]["environment"]["name"] == "pypi"
    (publish,) = [s for s in job_steps(TOOL_RELEASE, "pypi") if "pypi-publish" in s.uses]
    assert publish.uses.startswith("pypa/gh-action-pypi-publish@")
    assert publish.data["with"]["attestations"] is True
    release_steps = job_steps(TOOL_RELEASE, "github-release")
    (attest,) = [s for s in release_steps if "attest-build-provenance" in s.uses]
    (create,) = [s for s in release_steps if "gh release create" in s.run]
    assert attest.index < create.index, "no caller can download an unattested file"
    assert "dist/*-requirements.txt" in attest.data["with"]["subject-path"].split()
