"""Any GitHub: plan, publish, verify and the URL watch (`release verify --latest`) against a
stand-in GitHub Enterprise Server whose API, uploads, web and storage hosts are four
origins, none of them github.com, with a tag that needs quoting in a URL (`/` and `+`);
and immutable releases: draft -> upload -> verify -> publish works there, `release plan`
says the published release is immutable, and `--replace` is refused before any request
that changes anything."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from release.cli import main
from release.matrix import load_matrix
from release.records.manifest import DestinationRef, Manifest, write_manifest
from tests.github_standin import DEFAULT_REPO, GitHubStandIn, LoggedRequest
from tests.integration.test_plan import build_dist
from tests.integration.test_publish_e2e import serve
from tests.integration.wheels import PROJECT, VERSION, entry_for, make_wheel

TAG = "release/v0.1.0+cu129"
QUOTED_TAG = "release/v0.1.0%2Bcu129"  # what GitHub puts in html_url / browser_download_url
X86 = f"k3_kernels-{VERSION}+cu129-py3-none-manylinux_2_28_x86_64.whl"
ARM = f"k3_kernels-{VERSION}+cu129-py3-none-manylinux_2_28_aarch64.whl"


def write_matrix(root: Path, standin: GitHubStandIn) -> Path:
    (root / "project").mkdir(parents=True)
    (root / "project" / "pyproject.toml").write_text(
        f'[project]\nname = "{PROJECT}"\nversion = "{VERSION}"\n', encoding="utf-8"
    )
    path = root / "matrix.yaml"
    path.write_text(
        f"""project: project
defaults:
  arches: [x86_64, aarch64]
  sms: [75, 90]
  ptx: 90
  manylinux: "2_28"
cuda:
  "12.9": {{local-label: cu129, destination: github}}
destinations:
  github:
    kind: github
    repository: {DEFAULT_REPO}
    tag: "release/v{{version}}+cu129"
    api-url: "{standin.api_url}"
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GH_TOKEN", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def host_of(url: str) -> str:
    return urlsplit(url).netloc


def origins(standin: GitHubStandIn) -> dict[str, str]:
    return {
        "api": host_of(standin.api_url),
        "uploads": host_of(standin.uploads_url),
        "web": host_of(standin.web_url),
        "storage": host_of(standin.storage_url),
    }


def writes(standin: GitHubStandIn) -> list[LoggedRequest]:
    return [e for e in standin.request_log if e.method not in ("GET", "HEAD")]


def run_json(tmp_path: Path, name: str, argv: list[str]) -> tuple[int, dict[str, object]]:
    report = tmp_path / f"{name}.json"
    code = main([*argv, "--json-file", str(report)])
    data: dict[str, object] = json.loads(report.read_text(encoding="utf-8"))
    return code, data


def test_the_four_hosts_of_the_enterprise_stand_in_are_distinct_and_none_is_github_com(
    ghes_standin: GitHubStandIn,
) -> None:
    hosts = origins(ghes_standin)
    assert len(set(hosts.values())) == 4
    assert not any("github" in host for host in hosts.values())
    assert ghes_standin.api_url.endswith("/api/v3")
    assert ghes_standin.uploads_url.endswith("/api/uploads")
    assert urlsplit(ghes_standin.web_url).hostname != urlsplit(ghes_standin.api_url).hostname


@pytest.mark.slow
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


def rebuild(matrix: Path, dist: Path, payload: bytes) -> None:
    """The matrix's wheels again, with other bytes: what a changed rebuild gives."""
    entries = []
    for cell in load_matrix(matrix).cells:
        wheel = make_wheel(
            dist, version=str(cell.version), platform=cell.platform_tag, payload=payload
        )
        entries.append(entry_for(wheel, DestinationRef.of(cell), cuda=str(cell.cuda)))
    write_manifest(
        Manifest(project=PROJECT, version=VERSION, wheels=tuple(entries)), dist / "manifest.json"
    )


def test_the_stand_in_refuses_changes_to_a_published_immutable_release(
    github_standin: GitHubStandIn,
) -> None:
    github_standin.add_repo(DEFAULT_REPO, immutable_releases=True)
    auth = {"Authorization": f"Bearer {github_standin.token}"}
    api = f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases"
    draft = httpx.post(api, json={"tag_name": "v1", "draft": True}, headers=auth).json()
    assert draft["immutable"] is False
    upload = draft["upload_url"].split("{", 1)[0]
    headers = {**auth, "Content-Type": "application/octet-stream"}
    asset = httpx.post(upload, params={"name": "a.whl"}, content=b"a", headers=headers).json()
    published = httpx.patch(f"{api}/{draft['id']}", json={"draft": False}, headers=auth).json()
    assert published["immutable"] is True

    refused = httpx.post(upload, params={"name": "b.whl"}, content=b"b", headers=headers)
    assert refused.status_code == 422
    assert refused.json()["message"] == "Cannot upload assets to an immutable release."
    deleted = httpx.delete(f"{api}/assets/{asset['id']}", headers=auth)
    assert deleted.status_code == 422
    moved = httpx.patch(f"{api}/{draft['id']}", json={"tag_name": "v2"}, headers=auth)
    assert moved.status_code == 422
    renamed = httpx.patch(f"{api}/{draft['id']}", json={"name": "v1 (notes)"}, headers=auth)
    assert renamed.status_code == 200
    assert [a.data for a in github_standin.assets(draft["id"])] == [b"a"]


@pytest.mark.slow
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
