"""`release verify` against a host that routes by Accept (PEP 691 JSON to pip and uv, HTML
to the rest), as the tests' static server does: each form of a page is read and checked
whole, and the two must agree; a PEP 691 page's size is held to the bytes served."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from release.cli import main
from tests.github_standin import GitHubStandIn
from tests.integration.indexes import static_server
from tests.integration.wheels import github_destination, make_release

CU129 = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"
CU130 = CU129.replace("cu129", "cu130")
Edit = Callable[[str], str]


def anchor(text: str) -> str:
    return next(str(a) for a in re.findall(r"<a [^>]*>[^<]*</a>", text) if f">{CU129}<" in a)


def duplicated(text: str) -> str:
    return text.replace(anchor(text), anchor(text) + "\n" + anchor(text))


def hash_changed(text: str) -> str:
    return re.sub(r"#sha256=[0-9a-f]{64}", "#sha256=" + "e" * 64, text)


def stray(text: str) -> str:
    other = anchor(text).replace(f">{CU129}<", f">{CU130}<")
    return text.replace(anchor(text), anchor(text) + "\n" + other)


def removed(text: str) -> str:
    return text.replace(anchor(text), "")


Verified = Callable[[Callable[[Path], None]], tuple[int, list[dict[str, Any]]]]


@pytest.fixture
def verify_site(
    github_standin: GitHubStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Verified:
    """A release published to the stand-in, its index edited by `edit` (given the project
    page's folder) and served by a host that routes by Accept; verify's exit and checks."""

    def run(edit: Callable[[Path], None]) -> tuple[int, list[dict[str, Any]]]:
        gh = github_standin
        monkeypatch.setenv("GITHUB_TOKEN", gh.token)
        destination = github_destination(gh.api_url)
        release = make_release(tmp_path / "dist", pypi=None, github=destination)
        site = tmp_path / "site"
        assert main(["publish", "--dist", str(release.dist), "--index-dir", str(site)]) == 0
        edit(site / "cu129" / "k3-kernels")
        capsys.readouterr()
        with static_server(site) as base:
            url = f"cu129={base}cu129/"
            args = ["--index-url", url, "--no-pip", "--no-provenance", "--json"]
            code = main(["verify", "--dist", str(release.dist), *args])
        return code, json.loads(capsys.readouterr().out)["checks"]

    return run


def test_a_clean_page_is_read_in_both_forms(verify_site: Verified) -> None:
    code, checks = verify_site(lambda _: None)
    assert code == 0
    (page,) = [c for c in checks if c["check"] == "index-page"]
    assert page["ok"]
    assert page["detail"].startswith("read its PEP 691 JSON and its HTML: ")


@pytest.mark.parametrize(
    ("edit", "failed"),
    [
        (duplicated, {("duplicate", CU129)}),
        (hash_changed, {("hash", CU129), ("index-page", CU129)}),
        (stray, {("stray-link", CU130), ("index-page", CU130)}),
        (removed, {("index-page", CU129)}),
    ],
    ids=["duplicated", "hash-changed", "stray-link", "link-removed"],
)
def test_an_html_form_that_is_wrong_fails_though_the_json_is_right(
    verify_site: Verified, edit: Edit, failed: set[tuple[str, str]]
) -> None:
    def change(page: Path) -> None:
        html = page / "index.html"
        html.write_text(edit(html.read_text()))

    code, checks = verify_site(change)
    assert code == 7
    bad = [c for c in checks if not c["ok"]]
    # a disagreement is named by the page and the file: `PAGE -> FILE`
    assert {(c["check"], c["subject"].rsplit("-> ", 1)[-1]) for c in bad} == failed
    for check in bad:
        if check["check"] == "index-page":
            assert "which form a client gets depends on its Accept header" in check["detail"]
        else:
            assert check["detail"].endswith("(its HTML form)")


def test_a_pep691_size_that_is_not_the_bytes_served_fails(
    verify_site: Verified, tmp_path: Path
) -> None:
    def change(page: Path) -> None:
        data = json.loads((page / "index.json").read_text())
        data["files"][0]["size"] = 1
        (page / "index.json").write_text(json.dumps(data))

    code, checks = verify_site(change)
    assert code == 7
    (bad,) = [c for c in checks if not c["ok"]]
    assert (bad["check"], bad["subject"]) == ("hash", CU129)
    assert bad["detail"].endswith("cu129/k3-kernels/ says 1 bytes, the bytes served are "
                                  f"{(tmp_path / 'dist' / CU129).stat().st_size}")  # fmt: skip


def json_edited(page: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads((page / "index.json").read_text())
    for file in data["files"]:
        if file["filename"] == CU129:
            change(file)
    (page / "index.json").write_text(json.dumps(data))


def plus_encoded(file: dict[str, Any]) -> None:
    file["url"] = file["url"].replace("+", "%2B")


def hash_fragment(file: dict[str, Any]) -> None:
    file["url"] += "#sha256=" + file["hashes"]["sha256"]


def spaced_requires_python(file: dict[str, Any]) -> None:
    file["requires-python"] = file["requires-python"].replace(">=", ">= ")


@pytest.mark.parametrize(
    "change",
    [plus_encoded, hash_fragment, spaced_requires_python],
    ids=["url-%2B", "url-#sha256", "requires-python->=-space"],
)
def test_forms_that_say_the_same_in_other_spellings_pass(
    verify_site: Verified, change: Callable[[dict[str, Any]], None]
) -> None:
    """pip reads each as the other form says it: a false failure stops a good release (the
    JSON's `#sha256=` also sent its metadata check to the wheel itself)."""
    code, checks = verify_site(lambda page: json_edited(page, change))
    assert code == 0, [c for c in checks if not c["ok"]]


def test_a_disagreement_shows_the_fact_that_differs_whole(verify_site: Verified) -> None:
    def other_python(file: dict[str, Any]) -> None:
        file["requires-python"] = ">=3.12"

    code, checks = verify_site(lambda page: json_edited(page, other_python))
    assert code == 7
    (bad,) = [c for c in checks if c["check"] == "index-page" and not c["ok"]]
    assert "Requires-Python '>=3.12' against '>=3.9'" in bad["detail"]
