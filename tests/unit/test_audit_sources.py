"""What `release audit` reads: URLs from its arguments and a --urls file, refused with their
place when they are not http(s) URLs, and never repeated when they carry credentials."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.audit.sources import sources
from release.errors import ConfigError

WHEEL = "https://files.test/whl/k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"


def test_pages_and_wheels_with_their_pinned_hash(tmp_path: Path) -> None:
    urls = tmp_path / "pins.txt"
    urls.write_text(f"# pinned by URL\n\n  {WHEEL}#sha256={'A' * 64}  \nhttps://idx.test/simple\n")
    found = sources(["https://idx.test/cu129/k3-kernels/", "https://idx.test/simple/"], urls)
    assert [(s.kind, s.url, s.given) for s in found] == [
        ("page", "https://idx.test/cu129/k3-kernels/", "argument 1"),
        ("page", "https://idx.test/simple/", "argument 2"),  # given twice: read once
        ("wheel", WHEEL, f"{urls}:3"),
    ]
    assert found[2].sha256 == "a" * 64
    assert found[2].filename == WHEEL.rsplit("/", 1)[1]


@pytest.mark.parametrize(
    ("given", "asked"),
    [
        ("https://idx.test/simple/k3-kernels", "https://idx.test/simple/k3-kernels/"),
        (
            "https://idx.test/simple/k3-kernels/index.html",
            "https://idx.test/simple/k3-kernels/index.html",
        ),
        ("https://idx.test/cu129/index.json", "https://idx.test/cu129/index.json"),
        ("https://idx.test/simple/k3.html-pages", "https://idx.test/simple/k3.html-pages/"),
    ],
)
def test_a_directory_gets_its_slash_and_a_named_page_file_is_asked_as_given(
    given: str, asked: str
) -> None:
    (found,) = sources([given], None)
    assert (found.kind, found.url) == ("page", asked)


def test_every_line_that_is_not_a_url_is_named(tmp_path: Path) -> None:
    urls = tmp_path / "pins.txt"
    urls.write_text("ftp://x/y.whl\nnot a url\n")
    with pytest.raises(ConfigError) as refused:
        sources(["file:///etc/passwd"], urls)
    assert refused.value.problems == (
        "argument 1: 'file:///etc/passwd' is not an http(s) URL",
        f"{urls}:1: 'ftp://x/y.whl' is not an http(s) URL",
        f"{urls}:2: 'not a url' is not an http(s) URL",
    )


def test_a_url_with_credentials_is_refused_without_repeating_them() -> None:
    with pytest.raises(ConfigError) as refused:
        sources(["https://user:hunter2@idx.test/simple/"], None)
    assert "hunter2" not in refused.value.message
    with pytest.raises(ConfigError) as cut:  # a # in the password: urllib read it as a port
        sources(["https://user:hunter2#x@idx.test/simple/"], None)
    assert "hunter2" not in cut.value.message
    assert refused.value.problems == (
        "argument 1: a URL with credentials in it; release audit sends none",
    )


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://[::1/simple/", "is not a URL (Invalid IPv6 URL)"),
        ("http://idx.test:abc/simple/", "is not a URL (Port could not be cast"),
        ("http://idx.test:99999/simple/", "is not a URL (Port out of range"),
        ("http://idx.test/" + "a" * 9000, "a URL of 9016 characters, over the 8192"),
    ],
)
def test_a_url_that_cannot_be_asked_is_refused_in_one_line(url: str, why: str) -> None:
    with pytest.raises(ConfigError) as refused:
        sources([url], None)
    (problem,) = refused.value.problems
    assert problem.startswith("argument 1: ")
    assert why in problem
    assert len(problem) < 200


def test_nothing_to_audit() -> None:
    with pytest.raises(ConfigError, match="nothing to audit"):
        sources([], None)
