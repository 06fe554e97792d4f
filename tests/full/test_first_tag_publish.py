"""The publish and verify of a first tag, run for real: the `release` calls that the caller
`release init` writes makes in its publish job (actions/publish) and in wheels-verify.yml's
verify job, as test_first_tag.py plays them, run against the PyPI stand-in (pypiserver) and
the stand-in GitHub, then pip installs the default variant from the PyPI stand-in.

Stand-ins for what is not the tool's: the build jobs' dist is a small release of the
matrix's shape (tests/integration/wheels.py; the real builds are the full tier's build
tests), the OIDC exchange of trusted publishing is the stand-in's upload credentials (the
token path's too: pypiserver takes a password, not a PyPI token), and GitHub Pages is a
static server over the index the publish wrote. The stand-ins cannot sign as Sigstore's
public-good instance, so this run has no attestation: the played verify, with
`--require-provenance`, fails on exactly that (each wheel's provenance check, exit 7), and
without it passes; the provenance routes are proven on real attestation files in
tests/integration/test_verify.py and tests/unit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.cli import main
from tests.github_standin import GitHubStandIn
from tests.integration.test_first_tag import FIRST_TAG, Player, init_caller
from tests.integration.test_publish_e2e import serve
from tests.integration.wheels import (
    PROJECT,
    VERSION,
    github_destination,
    make_release,
    pypi_destination,
    with_sdist,
)
from tests.integration.workflows import make_stubs
from tests.pypi_server import PypiServer

pytestmark = pytest.mark.slow
SDIST = f"k3_kernels-{VERSION}.tar.gz"


@pytest.mark.parametrize("token", [None, "PYPI_API_TOKEN"])
def test_the_played_publish_and_verify_run_against_the_stand_ins_and_pip_installs(
    token: str | None,
    *,
    pypiserver: PypiServer,
    github_standin: GitHubStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    options = ("--pypi-token-secret", token) if token else ()
    caller = init_caller(tmp_path, *options)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    played = Player(FIRST_TAG, make_stubs(stubs), tmp_path / "run").play(caller)
    (publish,) = played.argv["publish"]
    (verify,) = played.argv["verify/verify"]

    # the workspace of the publish job: the build jobs' artifacts, merged into dist/
    workspace = tmp_path / "workspace"
    pypi = pypi_destination(pypiserver.url)
    release = make_release(
        workspace / "dist",
        pypi=pypi,
        github=github_destination(github_standin.api_url, index_url="https://a.example/k/"),
    )
    release = with_sdist(release, pypi)  # the build job of 13.0-x86_64 built it (--sdist)
    (release.dist / "manifest.json").rename(release.dist / "manifest-13.0-x86_64.json")
    monkeypatch.chdir(workspace)
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    assert main(publish) == 0
    published = json.loads((release.dist / "published.json").read_text(encoding="utf-8"))
    assert {f["destination"] for f in published["files"]} == {"pypi", "github"}
    assert (release.dist / "index" / "cu129").is_dir()
    # the sdist: on the PyPI stand-in beside the default variant's wheel, nowhere else
    assert pypiserver.files()[SDIST] == (release.dist / SDIST).read_bytes()
    assert SDIST not in [f["filename"] for f in published["files"]]
    assert [c["purpose"] for c in published["companions"] if c["filename"] == SDIST] == ["sdist"]
    capsys.readouterr()

    # verify job: the artifact `published` (the manifests and published.json) in dist/, the
    # index where Pages would serve it
    with serve(release.dist / "index") as base:
        overrides = ["--index-url", f"cu129={base}cu129/"]
        assert main([*verify, *overrides]) == 7
        blocks = capsys.readouterr().out.split("\n\n")
        failed = [b for b in blocks if "result:  FAILED" in b]
        # every file and companion of the record fails its provenance (the stand-ins sign
        # nothing, and --require-provenance fails closed); every other check passes
        shipped = [f["filename"] for f in published["files"] + published["companions"]]
        failed_subjects = [line.split()[-1] for b in failed for line in b.splitlines()
                           if line.startswith("subject:")]  # fmt: skip
        assert sorted(failed_subjects) == sorted(shipped), blocks
        for block in failed:
            assert "check:   provenance" in block
            assert "provenance not checked" in block or "no provenance" in block
        without = [a for a in verify if a != "--require-provenance"]
        assert main([*without, *overrides, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        checked = {(c["check"], c["ok"]) for c in report["checks"] if c["subject"] == SDIST}
        assert checked == {("download", True), ("listing", True), ("provenance", True)}

    target = pypiserver.pip_install(f"{PROJECT}=={VERSION}", tmp_path / "pip")
    assert [p.name for p in target.glob("*.dist-info")] == [f"k3_kernels-{VERSION}.dist-info"]
