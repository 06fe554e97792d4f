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

import pytest

from release.cli import main
from tests.github_standin import DEFAULT_REPO, GitHubStandIn, LoggedRequest
from tests.integration.test_plan import build_dist
from tests.integration.test_publish_e2e import serve
from tests.integration.wheels import PROJECT, VERSION

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
