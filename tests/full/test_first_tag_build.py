"""A first tag of the extension template, built for real: the files `release init` writes
(with the edits init says the project needs), played job by job as test_first_tag.py plays
them, with the build matrix that `release matrix --format github --per arch` really gives;
then each `release` call the played jobs made runs for real, in `needs:` order, in the
workspace its job would have: plan -> build (the cell's torch wheel and the sdist) -> the
build job's plan -> reproduce (`build --compare`, from empty caches) -> publish (the
caller's own job, against the PyPI stand-in) -> verify; and pip installs the wheel from
the PyPI stand-in.

Stand-ins for what is not the tool's: actions/upload-artifact and download-artifact are
the workspace's dist/ itself (the build job's `mv` of its manifest is made here), the OIDC
exchange is pypiserver's upload credentials, and the stand-ins cannot sign as Sigstore's
public-good instance: the played verify with `--require-provenance` fails closed on every
file (exit 7) and passes without it (test_first_tag_publish.py says the same of the
synthetic release; the provenance routes are proven on real attestation files in
tests/integration/test_verify.py and tests/unit).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from release.cli import main
from release.toolchain.torchenv import TorchEnv
from tests.full.shared_builds import TORCH, TORCH_CLI, TORCH_EPOCH, linked_cache
from tests.github_standin import GitHubStandIn
from tests.integration.test_first_tag import FIRST_TAG, Player, init_caller
from tests.integration.workflows import make_stubs
from tests.pypi_server import PypiServer

pytestmark = pytest.mark.slow

WHEEL = "muladd_ops-0.0.1-cp39-abi3-manylinux_2_34_x86_64.whl"
SDIST = "muladd_ops-0.0.1.tar.gz"
GATE = "use_cuda = use_cuda and torch.cuda.is_available() and CUDA_HOME is not None"


def edit_as_init_says(project: Path, pypi_url: str) -> None:
    """What init's report asks of the template, done as its user would: the CUDA gate
    forced by FORCE_CUDA (build.env), the exact torch, one SM (a test's cost), and the
    PyPI destination pointed at the stand-in."""
    setup = project / "setup.py"
    text = setup.read_text(encoding="utf-8")
    assert GATE in text
    forced = 'use_cuda = use_cuda and (torch.cuda.is_available() or os.environ.get("FORCE_CUDA") == "1") and CUDA_HOME is not None'  # noqa: E501
    setup.write_text(text.replace(GATE, forced), encoding="utf-8")
    matrix = project / "matrix.yaml"
    text = matrix.read_text(encoding="utf-8")
    for old, new in (
        ("torch: TODO-the-exact-torch-version", f'torch: "{TORCH}"'),
        ('  # env: {FORCE_CUDA: "1"}', '  env: {FORCE_CUDA: "1"}'),
        ("  sms: [75, 80, 86, 89, 90, 100]", "  sms: [90]"),
        ("  ptx: 100", "  ptx: 90"),
        (
            "  pypi:\n    kind: pypi",
            f"  pypi:\n    kind: pypi\n    repository-url: {pypi_url}\n"
            f"    index-url: {pypi_url}simple/",
        ),
    ):
        assert old in text, old
        text = text.replace(old, new)
    matrix.write_text(text, encoding="utf-8")


def cli(project: Path, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A `release` call of a played job, for real, in the job's workspace."""
    return subprocess.run(
        [sys.executable, "-c", TORCH_CLI, *argv],
        capture_output=True, text=True, check=False, cwd=project, env=env,
    )  # fmt: skip


# The whole first tag, two cold builds among its jobs: about 290 s alone, 526 s beside the
# full tier's other builds on 2 cores, and 812 s on a machine of half the speed. Its hang
# guard is its own.
@pytest.mark.timeout(1800)
def test_a_first_tag_of_the_extension_template_builds_publishes_verifies_and_installs(
    torch_environment: TorchEnv,
    *,
    release_cache: Path,
    pypiserver: PypiServer,
    github_standin: GitHubStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caller = init_caller(tmp_path)
    project = caller.parents[2]
    edit_as_init_says(project, pypiserver.url)
    env = {
        **os.environ,
        **pypiserver.env(),  # the stand-in, unlike PyPI, answers readers with credentials only
        "SOURCE_DATE_EPOCH": TORCH_EPOCH,
        "RELEASE_CACHE_DIR": str(linked_cache(tmp_path / "cache", release_cache)),
    }

    # the plan job's build matrix, as the tool gives it: one cell here
    matrix = cli(project, ["matrix", "--format", "github", "--per", "arch"], env)
    assert matrix.returncode == 0, matrix.stderr
    (entry,) = json.loads(matrix.stdout)["include"]
    assert (entry["cuda"], entry["arch"]) == ("13.0", "x86_64")
    run = FIRST_TAG.with_values({f"matrix.{k}": v for k, v in entry.items()})
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    played = Player(run, make_stubs(stubs), tmp_path / "run").play(caller)
    calls = played.argv

    # plan job
    (plan,) = [a for a in calls["build/plan"] if a[0] == "plan"]
    planned = cli(project, plan, env)
    assert planned.returncode == 0, planned.stderr[-3000:]
    # build job: the cell and the sdist, then its plan of dist/
    build, built_plan = calls["build/build"]
    built = cli(project, build, env)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    dist = project / "dist"
    assert {WHEEL, SDIST} <= {p.name for p in dist.iterdir()}
    (dist / "manifest.json").rename(dist / f"manifest-{entry['id']}.json")
    checked = cli(project, built_plan, env)
    assert checked.returncode == 0, checked.stderr[-3000:]
    # reproduce job: from empty caches, the same bytes
    (rebuild,) = calls["build/reproduce"]
    empty = {**env, "RELEASE_CACHE_DIR": str(linked_cache(tmp_path / "empty", release_cache))}
    reproduced = cli(project, rebuild, empty)
    assert reproduced.returncode == 0, reproduced.stdout[-3000:] + reproduced.stderr[-3000:]

    # the caller's publish job, then wheels-verify.yml's verify job
    (publish,) = calls["publish"]
    (verify,) = calls["verify/verify"]
    monkeypatch.chdir(project)
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    assert main(publish) == 0
    served = pypiserver.files()
    assert served[WHEEL] == (dist / WHEEL).read_bytes()
    assert served[SDIST] == (dist / SDIST).read_bytes()
    capsys.readouterr()
    assert main(verify) == 7  # the stand-ins sign nothing: --require-provenance fails closed
    assert "check:   provenance" in capsys.readouterr().out
    without = [a for a in verify if a != "--require-provenance"]
    assert main([*without, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    subjects = {c["subject"] for c in report["checks"] if c["ok"]}
    assert {WHEEL, SDIST} <= subjects

    target = pypiserver.pip_install("muladd_ops", tmp_path / "pip")
    assert (target / "muladd_ops").is_dir()
    assert [p.name for p in target.glob("*.dist-info")] == ["muladd_ops-0.0.1.dist-info"]
