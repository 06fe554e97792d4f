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

from release.cli import main
from release.matrix import load_matrix
from release.records.manifest import DestinationRef, Manifest, write_manifest
from tests.github_standin import DEFAULT_REPO, GitHubStandIn, LoggedRequest
from tests.integration.wheels import PROJECT, VERSION, entry_for, make_wheel, write_release
from tests.local_http import LOCAL

TAG = "release/v0.1.0+cu129"
QUOTED_TAG = "release/v0.1.0%2Bcu129"  # what GitHub puts in html_url / browser_download_url
X86 = f"k3_kernels-{VERSION}+cu129-py3-none-manylinux_2_28_x86_64.whl"
ARM = f"k3_kernels-{VERSION}+cu129-py3-none-manylinux_2_28_aarch64.whl"


def write_matrix(root: Path, standin: GitHubStandIn) -> Path:
    return write_release(
        root,
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
    )


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
    draft = LOCAL.post(api, json={"tag_name": "v1", "draft": True}, headers=auth).json()
    assert draft["immutable"] is False
    upload = draft["upload_url"].split("{", 1)[0]
    headers = {**auth, "Content-Type": "application/octet-stream"}
    asset = LOCAL.post(upload, params={"name": "a.whl"}, content=b"a", headers=headers).json()
    published = LOCAL.patch(f"{api}/{draft['id']}", json={"draft": False}, headers=auth).json()
    assert published["immutable"] is True

    refused = LOCAL.post(upload, params={"name": "b.whl"}, content=b"b", headers=headers)
    assert refused.status_code == 422
    assert refused.json()["message"] == "Cannot upload assets to an immutable release."
    deleted = LOCAL.delete(f"{api}/assets/{asset['id']}", headers=auth)
    assert deleted.status_code == 422
    moved = LOCAL.patch(f"{api}/{draft['id']}", json={"tag_name": "v2"}, headers=auth)
    assert moved.status_code == 422
    renamed = LOCAL.patch(f"{api}/{draft['id']}", json={"name": "v1 (notes)"}, headers=auth)
    assert renamed.status_code == 200
    assert [a.data for a in github_standin.assets(draft["id"])] == [b"a"]
