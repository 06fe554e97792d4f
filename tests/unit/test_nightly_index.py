"""release.nightly.pages and release.nightly.layout: the channel's pages link
each commit's files where they are, with their sha256 and PEP 658 digest, from any host."""

from __future__ import annotations

import json

from release.nightly.layout import (
    IMMUTABLE,
    NO_CACHE,
    commit_keys,
    file_key,
    url_of,
)
from release.nightly.pages import commit_pages, nightly_pages, root_pages
from release.nightly.state import NightlyFile, Shape
from release.remote.simple_index import SIMPLE_JSON, parse_project_page

PREFIX = "k3-kernels/"
BASE = "https://wheels.example.com/k3-kernels/"  # where the prefix is served
COMMIT = "c" * 40
VERSION = "0.1.1.dev1733212345"
NAMES = (
    f"k3_kernels-{VERSION}+cu129-py3-none-manylinux_2_28_aarch64.whl",
    f"k3_kernels-{VERSION}+cu129-py3-none-manylinux_2_28_x86_64.whl",
    f"k3_kernels-{VERSION}-py3-none-manylinux_2_28_aarch64.whl",
    f"k3_kernels-{VERSION}-py3-none-manylinux_2_28_x86_64.whl",
)
FILES = tuple(
    NightlyFile(
        filename=name,
        sha256=f"{i:064x}",
        size=100 + i,
        metadata_sha256=f"{i + 10:064x}",
        requires_python=">=3.9",
    )
    for i, name in enumerate(NAMES)
)


def url_of_key(key: str) -> str:
    assert key.startswith(PREFIX)
    return url_of(BASE, key.removeprefix(PREFIX))


def test_a_commits_pages_list_its_variant_with_links_that_resolve_to_its_files() -> None:
    pages = {p.key: p for p in commit_pages(PREFIX, COMMIT, "k3-kernels", FILES)}
    assert sorted(pages) == [
        f"{PREFIX}{COMMIT}/cu129/k3-kernels/",
        f"{PREFIX}{COMMIT}/cu129/k3-kernels/index.json",
        f"{PREFIX}{COMMIT}/k3-kernels/",
        f"{PREFIX}{COMMIT}/k3-kernels/index.json",
    ]
    for key, page in pages.items():
        assert page.cache_control == IMMUTABLE
        assert page.content_type == (SIMPLE_JSON if key.endswith(".json") else "text/html; "
                                     "charset=utf-8")  # fmt: skip
        listed = parse_project_page(page.body, page.content_type, url_of_key(key))
        labelled = "/cu129/" in key
        expected = [f for f in FILES if ("+cu129" in f.filename) == labelled]
        assert sorted(listed) == sorted(f.filename for f in expected)
        for file in expected:
            item = listed[file.filename]
            assert item.url == url_of(BASE, f"{COMMIT}/{file.filename}")
            assert "%2Bcu129" in item.url or not labelled
            assert item.sha256 == file.sha256
            assert item.metadata_sha256 == file.metadata_sha256
            assert item.requires_python == ">=3.9"


def test_the_nightly_pages_link_the_commits_immutable_files() -> None:
    pages = nightly_pages(PREFIX, COMMIT, "k3-kernels", FILES)
    assert {p.cache_control for p in pages} == {NO_CACHE}
    for page in pages:
        assert page.key.startswith(f"{PREFIX}nightly/")
        listed = parse_project_page(page.body, page.content_type, url_of_key(page.key))
        for item in listed.values():
            assert item.url == url_of(BASE, f"{COMMIT}/{item.name}")
            assert url_of_key(file_key(PREFIX, COMMIT, item.name)) == item.url
    json_page = next(p for p in pages if p.key.endswith("nightly/k3-kernels/index.json"))
    document = json.loads(json_page.body)
    assert document["meta"]["api-version"] == "1.3"
    assert document["versions"] == [VERSION]


def test_the_same_files_give_the_same_page_bytes_and_md5() -> None:
    first = nightly_pages(PREFIX, COMMIT, "k3-kernels", FILES)
    again = nightly_pages(PREFIX, COMMIT, "k3-kernels", tuple(reversed(FILES)))
    assert [(p.key, p.body, p.md5) for p in first] == [(p.key, p.body, p.md5) for p in again]


def test_root_pages_name_the_project_per_variant() -> None:
    pages = root_pages(PREFIX, "k3-kernels", ["", "cu129"])
    assert [p.key for p in pages] == [
        f"{PREFIX}nightly/",
        f"{PREFIX}nightly/index.json",
        f"{PREFIX}nightly/cu129/",
        f"{PREFIX}nightly/cu129/index.json",
    ]
    assert b'<a href="k3-kernels/">k3-kernels</a>' in pages[0].body


def test_a_commits_keys_are_every_object_it_has() -> None:
    shape = Shape(
        base="0.1.1",
        wheels=tuple(sorted(name.replace(VERSION, "{version}") for name in NAMES)),
    )
    keys = commit_keys(PREFIX, COMMIT, 1733212345, shape, "k3-kernels")
    pages = {p.key for p in commit_pages(PREFIX, COMMIT, "k3-kernels", FILES)}
    wheels = {file_key(PREFIX, COMMIT, name) for name in NAMES}
    metadata = {key + ".metadata" for key in wheels}
    assert set(keys) == pages | wheels | metadata
    assert len(keys) == len(set(keys)) == 12
