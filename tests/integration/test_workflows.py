"""The GitHub Actions workflows: schema, zizmor, pins, permissions, and every `run:` step.

Each `run:` script is executed by bash (as GitHub runs it: `bash -e -o pipefail`) with the
step's `env:` filled with sample values and a PATH that holds only recording stubs of the
commands a step may call: `release`, pip/uv installs and file plumbing. Anything else
fails with "command not found". Every recorded `release` call is then parsed by the real
CLI parser, so a renamed flag breaks this test, not a release.
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

import pytest
from ruamel.yaml import YAML

from release.cli import build_parser
from release.publish.run import COMPANIONS_DIR
from release.records.attestation import attestation_path

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
BIN = Path(sys.executable).parent
RELEASE = WORKFLOWS / "release.yml"
CI = WORKFLOWS / "ci.yml"
WATCH = WORKFLOWS / "watch.yml"

# What a `run:` step may call besides shell builtins.
PLUMBING = ("ls", "mv", "cp", "mkdir", "cat", "git")
STUBS = ("release", "python", "python3", "pip", "uv", *PLUMBING)

# Sample values of the expressions steps pass through `env:`.
SAMPLES = {
    "matrix.cuda": "12.9",
    "matrix.arch": "aarch64",
    "matrix.id": "12.9-aarch64",
    "inputs.cuda": "12.9",
    "(inputs.builder == 'cibuildwheel' || inputs.builder == 'container') && 'cell' || 'cuda'": (
        "cell"
    ),
    "github.ref_type == 'tag' && github.ref_name || ''": "v0.1.0",
    "runner.temp": "/home/runner/work/_temp",
    "github.token": "ghs_sampleToken0000",
    "steps.deployment.outputs.page_url": "https://k3-project.github.io/k3-kernels/",
    "inputs.latest || '3'": "3",
    "matrix.runner": "self-hosted/linux/h200",
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


def steps() -> Iterator[Step]:
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for job_name, job in load(path)["jobs"].items():
            for index, step in enumerate(job.get("steps", [])):
                yield Step(path.name, job_name, index, step)


def test_workflows_validate_against_the_github_schema() -> None:
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert len(files) == 3
    result = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_reports_nothing_above_low() -> None:
    result = subprocess.run(
        [str(BIN / "zizmor"), "--offline", "--format", "json", str(WORKFLOWS)],
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


def test_ignored_zizmor_findings_are_the_guarded_caches_only() -> None:
    """The one suppression: caches in the release workflow, restored only when nothing is
    published (a published build starts from empty caches)."""
    text = RELEASE.read_text(encoding="utf-8")
    ignored = [ln for ln in text.splitlines() if "zizmor:" in ln]
    assert len(ignored) == 2
    assert all(ln.endswith("# zizmor: ignore[cache-poisoning]") for ln in ignored)
    assert "zizmor:" not in CI.read_text(encoding="utf-8")
    caches = [s for s in steps() if str(s.data.get("uses", "")).startswith("actions/cache@")]
    guarded = [s for s in caches if s.workflow == "release.yml"]
    assert {s.job for s in guarded} == {"build", "cibuildwheel"}
    for step in guarded:
        assert step.data["if"] == "needs.plan.outputs.publish != 'true'", step.where


def test_every_action_is_pinned_to_a_full_commit_with_its_version() -> None:
    pattern = re.compile(
        r"\s*(?:-\s+)?uses:\s+([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # v\d+\.\d+\.\d+\b"
    )
    count = 0
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"\s*(?:-\s+)?uses:", line):
                count += 1
                assert pattern.match(line), f"{path.name}:{number}: {line.strip()}"
    assert count >= 20


def test_permissions_are_empty_at_the_top_and_least_per_job() -> None:
    for path in (RELEASE, CI, WATCH):
        workflow = load(path)
        assert workflow["permissions"] == {}, path.name
        assert "pull_request_target" not in triggers(workflow)
        for name, job in workflow["jobs"].items():
            assert "permissions" in job, f"{path.name}: job {name} has no permissions"
    jobs = load(RELEASE)["jobs"]
    assert jobs["publish"]["permissions"] == {
        "contents": "write",
        "id-token": "write",
        "attestations": "write",
    }
    for name, job in jobs.items():
        if name != "publish":
            assert "attestations" not in job["permissions"], name
    assert jobs["publish"]["environment"]["name"] == "release"
    assert jobs["index"]["permissions"] == {"pages": "write", "id-token": "write"}
    for name in ("plan", "build", "reproduce", "cibuildwheel", "gpu", "publish-dry-run", "verify"):
        assert jobs[name]["permissions"] == {"contents": "read"}, name


def test_the_release_reads_plan_build_publish_verify() -> None:
    workflow = load(RELEASE)
    on = triggers(workflow)
    assert on["push"] == {"tags": ["v*"]}
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["dry_run"]["type"] == "boolean"
    assert inputs["dry_run"]["default"] is True
    assert inputs["cuda"]["default"] == ""
    assert inputs["builder"]["options"] == ["release-build", "cibuildwheel", "container"]
    jobs = workflow["jobs"]
    assert list(jobs) == [
        "plan", "build", "reproduce", "cibuildwheel", "container", "gpu", "publish-dry-run",
        "publish", "index", "verify",
    ]  # fmt: skip
    assert jobs["build"]["needs"] == jobs["cibuildwheel"]["needs"] == "plan"
    assert jobs["container"]["needs"] == "plan"
    assert jobs["reproduce"]["needs"] == ["plan", "build"]
    assert jobs["publish"]["needs"] == [
        "plan", "build", "reproduce", "cibuildwheel", "container", "gpu",
    ]  # fmt: skip
    assert jobs["verify"]["needs"] == ["publish", "index"]
    for name in ("build", "reproduce", "cibuildwheel", "container"):
        assert jobs[name]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    native = "${{ matrix.arch == 'aarch64' && 'ubuntu-24.04-arm' || 'ubuntu-24.04' }}"
    assert jobs["cibuildwheel"]["runs-on"] == jobs["container"]["runs-on"] == native


def test_no_expression_is_expanded_inside_a_run_script() -> None:
    for step in steps():
        if "run" in step.data:
            assert "${{" not in step.data["run"], step.where


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"Run the tests.*?```sh\n(.*?)\n```", readme, re.DOTALL)
    assert match is not None
    (job,) = load(CI)["jobs"].values()
    runs = [s["run"].strip() for s in job["steps"] if "run" in s]
    assert runs == [match.group(1).strip()]
    on = triggers(load(CI))
    assert set(on) == {"push", "pull_request"}


# --- Every run: script, executed against recording stubs. ---

STUB = """#!{python}
import json, os, sys
with open(os.environ["STUB_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
"""


def sample(value: object) -> str:
    text = str(value)

    def one(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        return SAMPLES.get(expression, "sample")

    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


@pytest.fixture(scope="module")
def stub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("stubs")
    for name in STUBS:
        path = directory / name
        path.write_text(STUB.format(python=sys.executable), encoding="utf-8")
        path.chmod(0o755)
    return directory


def run_step(step: Step, stub_dir: Path, tmp: Path) -> list[list[str]]:
    log = tmp / "calls.jsonl"
    log.write_text("", encoding="utf-8")
    env = {
        "PATH": str(stub_dir),
        "STUB_LOG": str(log),
        "HOME": str(tmp),
        "RUNNER_TEMP": str(tmp),
        "GITHUB_WORKSPACE": str(tmp),
        "GITHUB_OUTPUT": str(tmp / "output"),
        "GITHUB_ENV": str(tmp / "env"),
        "GITHUB_PATH": str(tmp / "path"),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary"),
        **{str(k): sample(v) for k, v in step.data.get("env", {}).items()},
    }
    result = subprocess.run(
        ["/bin/bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step.data["run"]],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"{step.where}: {result.stderr.strip()}"
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def allowed(call: list[str]) -> bool:
    name, args = call[0], call[1:]
    if name in ("release", *PLUMBING):
        return True
    if name in ("python", "python3"):
        return (
            args[:3] == ["-m", "pip", "install"]
            or args[:2] == ["-m", "venv"]
            or args[:3] == ["-m", "pypi_attestations", "sign"]
        )
    if name == "pip":
        return args[:1] == ["install"]
    if name == "uv":
        return args[:2] == ["pip", "install"]
    return False


def test_run_steps_call_only_release_installs_and_plumbing(stub_dir: Path, tmp_path: Path) -> None:
    parser = build_parser()
    seen: dict[str, list[str]] = {}
    for step in steps():
        if "run" not in step.data or step.workflow != "release.yml":
            continue
        tmp = tmp_path / f"{step.job}-{step.index}"
        tmp.mkdir()
        for call in run_step(step, stub_dir, tmp):
            assert allowed(call), f"{step.where}: {call}"
            if call[0] != "release":
                continue
            try:
                args = parser.parse_args(call[1:])
            except SystemExit:
                pytest.fail(f"{step.where}: `release {' '.join(call[1:])}` does not parse")
            seen.setdefault(args.command, []).append(step.where)
    assert set(seen) == {"matrix", "plan", "build", "env", "gpu-gate", "publish", "verify"}


def test_the_matrix_step_filters_and_picks_the_fan_out(stub_dir: Path, tmp_path: Path) -> None:
    (step,) = [s for s in steps() if s.job == "plan" and s.data.get("id") == "matrix"]
    calls = run_step(step, stub_dir, tmp_path)
    assert calls == [["release", "matrix", "--format", "github", "--per", "cell", "--cuda", "12.9"]]
    assert (tmp_path / "output").read_text(encoding="utf-8").startswith("matrix=")
    unfiltered = Step(step.workflow, step.job, step.index, {**step.data, "env": {"PER": "cuda"}})
    (call,) = run_step(unfiltered, stub_dir, tmp_path)
    args = build_parser().parse_args(call[1:])
    assert (args.per, args.cuda) == ("cuda", [])


def test_publish_jobs_publish_or_plan_only(stub_dir: Path, tmp_path: Path) -> None:
    calls: dict[str, list[list[str]]] = {}
    for step in steps():
        if step.job in ("publish", "publish-dry-run") and "run" in step.data:
            tmp = tmp_path / f"{step.job}-{step.index}"
            tmp.mkdir()
            calls.setdefault(step.job, []).extend(run_step(step, stub_dir, tmp))
    parser = build_parser()
    dry = [parser.parse_args(c[1:]) for c in calls["publish-dry-run"] if c[0] == "release"]
    real = [parser.parse_args(c[1:]) for c in calls["publish"] if c[0] == "release"]
    assert [(a.command, a.dry_run) for a in dry] == [("publish", True)]
    assert [(a.command, a.dry_run) for a in real] == [("publish", False)]


def test_nothing_is_published_before_a_second_runner_reproduced_every_wheel(
    stub_dir: Path, tmp_path: Path
) -> None:
    jobs = load(RELEASE)["jobs"]
    for name in ("publish", "publish-dry-run"):
        assert "reproduce" in jobs[name]["needs"]
        assert "!contains(needs.*.result, 'failure')" in jobs[name]["if"]
    uses = [str(s.data.get("uses", "")) for s in steps() if s.job == "reproduce"]
    assert not any(u.startswith("actions/cache@") for u in uses), "a rebuild from empty caches"
    calls = [
        c
        for s in steps()
        if s.job == "reproduce" and "run" in s.data
        for c in run_step(s, stub_dir, tmp_path)
        if c[0] == "release" and c[1] == "build"
    ]
    (call,) = calls
    args = build_parser().parse_args(call[1:])
    assert args.command == "build"
    assert args.compare == Path("dist/manifest-cuda12.9.json")
    assert args.cuda == ["12.9"]
    download = [s for s in steps() if s.job == "reproduce" and "download-artifact" in str(s.data)]
    assert download[0].data["with"]["name"] == "dist-cuda${{ matrix.cuda }}"


def test_a_container_job_builds_its_cell_natively_in_the_cells_manylinux_and_rebuilds_it(
    stub_dir: Path, tmp_path: Path
) -> None:
    job = load(RELEASE)["jobs"]["container"]
    assert job["if"] == "inputs.builder == 'container'"
    image, tag = job["container"].rsplit(":", 1)
    assert image == "quay.io/pypa/manylinux_${{ matrix.manylinux }}_${{ matrix.arch }}"
    assert re.fullmatch(r"\d{4}\.\d{2}\.\d{2}-\d+", tag), "a dated tag, never latest"
    calls = [
        parse
        for s in steps()
        if s.job == "container" and "run" in s.data
        for c in run_step(s, stub_dir, tmp_path)
        if c[0] == "release" and c[1] == "build"
        for parse in [build_parser().parse_args(c[1:])]
    ]
    built, rebuilt = calls
    assert (built.cuda, built.arch, built.out, built.compare) == (
        ["12.9"],
        ["aarch64"],
        Path("dist"),
        None,
    )
    assert (rebuilt.cuda, rebuilt.arch, rebuilt.compare) == (
        ["12.9"],
        ["aarch64"],
        Path("dist/manifest.json"),
    )
    for name in ("gpu", "publish", "publish-dry-run"):
        assert "needs.container.result == 'success'" in load(RELEASE)["jobs"][name]["if"]


def test_the_watch_verifies_the_latest_releases_every_day(stub_dir: Path, tmp_path: Path) -> None:
    workflow = load(WATCH)
    on = triggers(workflow)
    assert on["schedule"] == [{"cron": "17 6 * * *"}]
    assert "workflow_dispatch" in on
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "read"}
    calls = [
        call
        for step in steps()
        if step.workflow == "watch.yml" and "run" in step.data
        for call in run_step(step, stub_dir, tmp_path)
        if call[0] == "release"
    ]
    (call,) = calls
    args = build_parser().parse_args(call[1:])
    assert (args.command, args.latest, args.tag) == ("verify", 3, [])


def test_publishing_waits_for_the_gpu_gate_on_the_runners_matrix_yaml_names(
    stub_dir: Path, tmp_path: Path
) -> None:
    jobs = load(RELEASE)["jobs"]
    gpu = jobs["gpu"]
    for name in ("publish", "publish-dry-run"):
        assert "gpu" in jobs[name]["needs"]
    assert gpu["runs-on"] == "${{ matrix.labels }}"
    assert gpu["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.gpu) }}"
    # no runner named: `release matrix --format gpu` prints an empty include, the job skips
    assert "needs.plan.outputs.gpu != '{\"include\":[]}'" in gpu["if"]
    assert "!contains(needs.*.result, 'failure')" in gpu["if"]
    (gpu_step,) = [s for s in steps() if s.job == "plan" and s.data.get("id") == "gpu"]
    assert run_step(gpu_step, stub_dir, tmp_path) == [["release", "matrix", "--format", "gpu"]]
    assert jobs["plan"]["outputs"]["gpu"] == "${{ steps.gpu.outputs.matrix }}"
    calls = [
        c
        for s in steps()
        if s.job == "gpu" and "run" in s.data
        for c in run_step(s, stub_dir, tmp_path)
        if c[0] == "release"
    ]
    (call,) = calls
    args = build_parser().parse_args(call[1:])
    assert (args.command, args.dist) == ("gpu-gate", Path("dist"))
    assert args.runner == SAMPLES["matrix.runner"]


# --- Provenance: PEP 740 attestations for PyPI, GitHub artifact attestations for all. ---


def publish_steps() -> list[Step]:
    return [s for s in steps() if s.workflow == "release.yml" and s.job == "publish"]


def test_every_wheel_is_signed_pep_740_before_release_publish_sends_them(
    stub_dir: Path, tmp_path: Path
) -> None:
    job = publish_steps()
    (sign,) = [s for s in job if "pypi_attestations" in str(s.data.get("run", ""))]
    (upload,) = [s for s in job if "release publish" in str(s.data.get("run", ""))]
    assert sign.index < upload.index
    dist = tmp_path / "dist"
    dist.mkdir()
    plain = "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    labelled = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"
    for name in (plain, labelled, "k3_kernels-0.1.0-py3-none-any.whl.metadata"):
        (dist / name).write_bytes(b"wheel")
    # PyPI's wheels (twine sends the attestation) and the GitHub-hosted ones (the index links
    # their provenance object), nothing else
    assert run_step(sign, stub_dir, tmp_path) == [
        ["python", "-m", "pypi_attestations", "sign", f"dist/{labelled}", f"dist/{plain}"]
    ]
    # pypi-attestations writes <wheel>.publish.attestation: where `release publish` looks
    assert attestation_path(dist / plain).name == f"{plain}.publish.attestation"
    for path in list(dist.iterdir()):
        path.unlink()
    assert run_step(sign, stub_dir, tmp_path) == [], "no wheel: nothing to sign"


def test_build_provenance_covers_every_wheel_companion_and_index_file(
    stub_dir: Path, tmp_path: Path
) -> None:
    job = publish_steps()
    attests = [s for s in job if str(s.data.get("uses", "")).startswith("actions/attest")]
    (attest,) = attests
    action, sha = str(attest.data["uses"]).split("@")
    assert action == "actions/attest-build-provenance"
    assert re.fullmatch(r"[0-9a-f]{40}", sha), "pinned by a full commit SHA"
    (upload,) = [s for s in job if "release publish" in str(s.data.get("run", ""))]
    assert attest.index > upload.index, "the companion files and the index exist only then"
    (call,) = run_step(upload, stub_dir, tmp_path)
    args = build_parser().parse_args(call[1:])
    subjects = attest.data["with"]["subject-path"].split()
    assert subjects == [
        f"{args.dist}/*.whl",
        f"{args.dist}/{COMPANIONS_DIR}/*",
        f"{args.index_dir}/**",
    ]
    # the pages artifact is the attested index
    (pages,) = [s for s in job if "upload-pages-artifact" in str(s.data.get("uses", ""))]
    assert Path(pages.data["with"]["path"]) == args.index_dir
    # GitHub artifact attestations come from the publish job only
    elsewhere = [s.where for s in steps() if "attest" in str(s.data.get("uses", ""))]
    assert elsewhere == [attest.where]
