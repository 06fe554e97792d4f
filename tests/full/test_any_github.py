"""The full tier's part of tests/integration/test_any_github.py (its docstring says what both
parts check).

Any GitHub: plan, publish, verify and the URL watch (`release verify --latest`) against a
stand-in GitHub Enterprise Server whose API, uploads, web and storage hosts are four
origins, none of them github.com, with a tag that needs quoting in a URL (`/` and `+`);
and immutable releases: draft -> upload -> verify -> publish works there, `release plan`
says the published release is immutable, and `--replace` is refused before any request
that changes anything.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.cli import main
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
from tests.integration.test_any_github import (
    ARM,
    QUOTED_TAG,
    TAG,
    X86,
    origins,
    rebuild,
    run_json,
    write_matrix,
    writes,
)
from tests.integration.test_plan import build_dist
from tests.integration.test_publish_e2e import serve
from tests.integration.wheels import VERSION

pytestmark = pytest.mark.slow


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GH_TOKEN", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_plan_publish_verify_and_the_watch_against_an_enterprise_server(
    ghes_standin: GitHubStandIn, tmp_path: Path, environment: pytest.MonkeyPatch
) -> None:
    matrix = write_matrix(tmp_path, ghes_standin)
    dist = tmp_path / "dist"
    build_dist(matrix, dist)
    environment.setenv("GITHUB_TOKEN", ghes_standin.token)
    web = f"{ghes_standin.web_url}/{DEFAULT_REPO}/releases/download/{QUOTED_TAG}"

    # before the release exists, its URLs are on the web host the repository's page names
    code, plan = run_json(
        tmp_path,
        "plan",
        ["plan", "--matrix", str(matrix), "--dist", str(dist), "--cache-dir", str(tmp_path)],
    )
    assert code == 0
    assert {c["wheel"]: c["url"] for c in plan["cells"]} == {  # type: ignore[attr-defined]
        X86: f"{web}/{X86}",
        ARM: f"{web}/{ARM}",
    }

    site = tmp_path / "site"
    assert main(["publish", "--dist", str(dist), "--index-dir", str(site)]) == 0
    (release,) = ghes_standin.releases(DEFAULT_REPO)
    assert release.tag_name == TAG
    assert not release.draft
    hosts = origins(ghes_standin)
    for entry in ghes_standin.request_log:
        assert entry.header("host") == hosts[entry.origin], entry
        if entry.origin == "api":
            assert entry.path.startswith("/api/v3/repos/"), entry
    uploads = [e for e in ghes_standin.request_log if e.origin == "uploads"]
    assert uploads
    assert all(
        e.method == "POST"
        and e.path == f"/api/uploads/repos/{DEFAULT_REPO}/releases/{release.id}/assets"
        and e.status == 201
        for e in uploads
    )
    assert not [e for e in writes(ghes_standin) if e.origin != "api" and e not in uploads]
    by_tag = [e.path for e in ghes_standin.request_log if "/releases/tags/" in e.path]
    assert by_tag
    assert all(path == f"/api/v3/repos/{DEFAULT_REPO}/releases/tags/{TAG}" for path in by_tag)
    record = json.loads((dist / "published.json").read_text(encoding="utf-8"))
    assert {f["filename"]: f["url"] for f in record["files"]} == {
        X86: f"{web}/{X86}",
        ARM: f"{web}/{ARM}",
    }
    assert all(c["url"].startswith(f"{web}/") for c in record["companions"])

    ghes_standin.clear_log()
    code, verified = run_json(tmp_path, "verify", ["verify", "--dist", str(dist), "--no-pip"])
    assert code == 0, verified
    downloads = [e for e in ghes_standin.request_log if e.origin == "web"]
    assert {e.path for e in downloads} >= {
        f"/{DEFAULT_REPO}/releases/download/{QUOTED_TAG}/{X86}",
        f"/{DEFAULT_REPO}/releases/download/{QUOTED_TAG}/{ARM}",
    }
    assert all(e.status == 302 for e in downloads)
    storage = [e for e in ghes_standin.request_log if e.origin == "storage"]
    assert storage
    assert all(e.status == 200 and e.header("authorization") is None for e in storage)
    checks = verified["checks"]
    assert any(c["check"] == "download" and c["subject"] == X86 for c in checks)  # type: ignore[attr-defined]

    # the URL watch: the release re-derived from the enterprise server alone, no dist/
    ghes_standin.clear_log()
    with serve(site) as base:
        code, watched = run_json(
            tmp_path,
            "watch",
            ["verify", "--matrix", str(matrix), "--latest", "1", "--no-pip",
             "--index-base-url", base],
        )  # fmt: skip
    assert code == 0, watched
    assert watched["version"] == VERSION
    proved = {c["subject"] for c in watched["checks"] if c["check"] == "download" and c["ok"]}  # type: ignore[attr-defined]
    assert {X86, ARM} <= proved
    assert {e.origin for e in ghes_standin.request_log} == {"api", "web", "storage"}
    assert writes(ghes_standin) == []


def test_immutable_releases_draft_upload_verify_publish_then_replace_is_refused(
    ghes_standin: GitHubStandIn,
    tmp_path: Path,
    environment: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ghes_standin.add_repo(DEFAULT_REPO, immutable_releases=True)
    matrix = write_matrix(tmp_path, ghes_standin)
    dist = tmp_path / "dist"
    build_dist(matrix, dist)
    environment.setenv("GITHUB_TOKEN", ghes_standin.token)

    assert main(["publish", "--dist", str(dist), "--index-dir", str(tmp_path / "site")]) == 0
    (release,) = ghes_standin.releases(DEFAULT_REPO)
    assert release.immutable
    changes = [(e.method, e.origin) for e in writes(ghes_standin)]
    # created as a draft, every file uploaded to it, published last; nothing after that
    assert changes[0] == ("POST", "api")
    assert changes[-1] == ("PATCH", "api")
    assert changes[1:-1] == [("POST", "uploads")] * 5
    assert main(["verify", "--dist", str(dist), "--no-pip"]) == 0

    code, plan = run_json(
        tmp_path,
        "plan",
        ["plan", "--matrix", str(matrix), "--dist", str(dist), "--cache-dir", str(tmp_path)],
    )
    assert code == 0
    for cell in plan["cells"]:  # type: ignore[attr-defined]
        assert cell["state"] == "identical (skip)"
        assert cell["reason"] == f"same sha256 (the release {DEFAULT_REPO}@{TAG} is immutable)"

    rebuild(matrix, dist, b"#rebuilt with other bytes\n")
    capsys.readouterr()
    ghes_standin.clear_log()
    assert main(["publish", "--dist", str(dist), "--replace"]) == 6
    err = capsys.readouterr().err
    assert f"error: the release {DEFAULT_REPO}@{TAG} is immutable" in err
    assert "--replace or not" in err
    assert (
        "hint: immutable releases can't change: release a new version, such as 0.1.0.post1" in err
    )
    assert ghes_standin.request_log
    assert writes(ghes_standin) == []
    assert all(b"rebuilt" not in a.data for a in ghes_standin.assets(release.id))
