"""The index renderer and the simple-API readers: PEP 503 HTML, PEP 691 JSON, PEP 658/714."""

from __future__ import annotations

import json
import tracemalloc
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

from release.destinations.index import (
    IndexFile,
    is_flat_file,
    one_per_name,
    render_index,
    write_index,
)
from release.errors import FileError
from release.remote import simple_index
from release.remote.simple_index import (
    MAX_PAGE_FILES,
    MAX_PAGE_VALUES,
    SIMPLE_JSON,
    parse_index_page,
    parse_project_page,
    parse_simple_html,
    parse_simple_json,
    project_files,
)

BASE = "https://github.com/k3-org/k3-kernels/releases/download"
SHA_A = "a" * 64
SHA_B = "b" * 64


def cu129(arch: str, sha: str = SHA_A, version: str = "0.1.0", **kw: str) -> IndexFile:
    name = f"k3_kernels-{version}+cu129-py3-none-manylinux_2_28_{arch}.whl"
    return IndexFile(filename=name, url=f"{BASE}/v{version}/{name}", sha256=sha, **kw)  # type: ignore[arg-type]


def test_one_tree_per_label_with_root_project_pages_and_json() -> None:
    cu130 = IndexFile(
        filename="k3_kernels-0.1.0+cu130-py3-none-manylinux_2_28_x86_64.whl",
        url=f"{BASE}/v0.1.0/x.whl",
        sha256=SHA_B,
    )
    tree = render_index([cu129("x86_64"), cu129("aarch64"), cu130])
    assert sorted(tree) == [
        "cu129/index.html",
        "cu129/index.json",
        "cu129/k3-kernels/index.html",
        "cu129/k3-kernels/index.json",
        "cu130/index.html",
        "cu130/index.json",
        "cu130/k3-kernels/index.html",
        "cu130/k3-kernels/index.json",
    ]
    assert b'<a href="k3-kernels/">k3-kernels</a>' in tree["cu129/index.html"]
    assert b"cu130" not in tree["cu129/k3-kernels/index.html"]


def test_anchor_text_is_the_filename_and_every_link_carries_its_sha256() -> None:
    files = [cu129("x86_64", SHA_A), cu129("aarch64", SHA_B)]
    page = render_index(files)["cu129/k3-kernels/index.html"].decode()
    listed = parse_simple_html(page, "https://example.github.io/cu129/k3-kernels/")
    assert set(listed) == {f.filename for f in files}
    for file in files:
        assert listed[file.filename].url == file.url
        assert listed[file.filename].sha256 == file.sha256
        assert listed[file.filename].hash_name == "sha256"


def test_requires_python_is_escaped_and_read_back() -> None:
    page = render_index([cu129("x86_64", requires_python=">=3.9,<4")])[
        "cu129/k3-kernels/index.html"
    ]
    assert b'data-requires-python="&gt;=3.9,&lt;4"' in page
    (listed,) = parse_simple_html(page.decode(), "https://x/").values()
    assert listed.requires_python == ">=3.9,<4"


def test_core_metadata_only_when_a_sidecar_is_hosted() -> None:
    without = render_index([cu129("x86_64")])["cu129/k3-kernels/index.html"]
    assert b"data-core-metadata" not in without
    tree = render_index([cu129("x86_64", metadata_sha256="c" * 64)])
    page = tree["cu129/k3-kernels/index.html"]
    assert f'data-core-metadata="sha256={"c" * 64}"'.encode() in page
    assert f'data-dist-info-metadata="sha256={"c" * 64}"'.encode() in page
    (entry,) = json.loads(tree["cu129/k3-kernels/index.json"])["files"]
    assert entry["core-metadata"] == {"sha256": "c" * 64}


def test_a_provenance_link_only_where_one_is_hosted_in_both_formats() -> None:
    link = f"{BASE}/v0.1.0/x.whl.provenance?a=1&b=2"
    tree = render_index([cu129("x86_64", provenance_url=link), cu129("aarch64", SHA_B)])
    page = tree["cu129/k3-kernels/index.html"].decode()
    assert page.count("data-provenance=") == 1
    assert f'data-provenance="{link.replace("&", "&amp;")}"' in page
    html_listed = parse_simple_html(page, "https://x/cu129/k3-kernels/")
    data = json.loads(tree["cu129/k3-kernels/index.json"])
    by_name = {f["filename"]: f for f in data["files"]}
    json_listed = parse_simple_json(data, "https://x/cu129/k3-kernels/")
    for listed in (html_listed, json_listed):
        assert {f.provenance_url for f in listed.values()} == {link, None}
    assert [f.get("provenance") for f in by_name.values()].count(link) == 1
    assert sum("provenance" in f for f in by_name.values()) == 1


def test_pep691_json_reads_back_the_same_files() -> None:
    files = [cu129("x86_64", SHA_A), cu129("aarch64", SHA_B, version="0.2.0")]
    data = json.loads(render_index(files)["cu129/k3-kernels/index.json"])
    assert data["meta"]["api-version"] == "1.3"  # PEP 740's version of the simple API
    assert data["versions"] == ["0.1.0+cu129", "0.2.0+cu129"]
    listed = parse_simple_json(data, "https://x/cu129/k3-kernels/")
    assert {n: f.sha256 for n, f in listed.items()} == {f.filename: f.sha256 for f in files}


def test_the_same_filename_with_two_hashes_is_an_error_not_two_links() -> None:
    with pytest.raises(ValueError, match="listed twice with different sha256"):
        render_index([cu129("x86_64", SHA_A), cu129("x86_64", SHA_B)])


def test_a_name_held_twice_with_other_bytes_names_both_urls_the_same_bytes_once() -> None:
    first = replace(cu129("x86_64", SHA_A), url="https://h/v0.1.0/w.whl")
    other = replace(cu129("x86_64", SHA_B), url="https://h/v0.0.9/w.whl")
    with pytest.raises(ValueError, match="listed twice with different sha256") as caught:
        one_per_name([first, other])
    assert "https://h/v0.1.0/w.whl (" in str(caught.value)
    assert "https://h/v0.0.9/w.whl (" in str(caught.value)
    same = replace(first, url="https://h/v0.0.9/w.whl")
    assert one_per_name([first, same]) == {first.filename: first}  # the first kept


def test_a_file_without_a_local_label_does_not_belong_in_the_index() -> None:
    plain = IndexFile(
        filename="k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl", url="u", sha256=SHA_A
    )
    with pytest.raises(ValueError, match="belongs on PyPI"):
        render_index([plain])


def test_rendering_is_deterministic_and_order_independent() -> None:
    files = [cu129("x86_64"), cu129("aarch64", SHA_B)]
    assert render_index(files) == render_index(list(reversed(files)))


def test_content_type_picks_the_parser() -> None:
    body = json.dumps(
        {"files": [{"filename": "a.whl", "url": "a.whl", "hashes": {"sha256": SHA_A}}]}
    )
    listed = parse_project_page(
        body.encode(), "application/vnd.pypi.simple.v1+json", "https://x/simple/a/"
    )
    assert listed["a.whl"].url == "https://x/simple/a/a.whl"
    html = b'<a href="../../packages/a.whl#md5=ABC">a.whl</a>'
    (legacy,) = parse_project_page(html, "text/html", "https://x/simple/a/").values()
    assert legacy.url == "https://x/packages/a.whl"
    assert legacy.sha256 is None
    assert (legacy.hash_name, legacy.digest) == ("md5", "abc")


def test_a_links_hash_is_the_first_pip_checks() -> None:
    # `#sha256=X&md5=Y`: pip checks sha256 X; audit read the sha256 as `X&md5=Y` and found
    # a mismatch pip does not
    name = "k3_kernels-0.1.0-py3-none-any.whl"
    page = f'<a href="{name}#sha256={SHA_A}&md5=x">{name}</a><a href="b#egg=k3">b</a>'
    first, other = project_files(page.encode(), "text/html", "https://idx.test/k/")
    assert (first.hash_name, first.sha256, first.digest) == ("sha256", SHA_A, SHA_A)
    assert (other.hash_name, other.sha256, other.digest) == (None, None, None)


def test_the_json_media_type_is_matched_in_any_case() -> None:
    name = "k3_kernels-0.1.0-py3-none-any.whl"
    document = {"files": [{"filename": name, "url": name, "hashes": {"sha256": SHA_A}}]}
    for content_type in ("Application/VND.PYPI.SIMPLE.V1+JSON", f"{SIMPLE_JSON.upper()}; q=1"):
        listed = project_files(json.dumps(document).encode(), content_type, "https://idx.test/k/")
        assert [(f.name, f.sha256) for f in listed] == [(name, SHA_A)]


def test_a_page_is_read_in_the_charset_its_content_type_names() -> None:
    html = '<a href="a.whl">a.whl</a><!-- caf\u00e9 -->'.encode("latin-1")
    page = "https://x/simple/a/"
    assert list(parse_project_page(html, "text/html; charset=ISO-8859-1", page)) == ["a.whl"]
    with pytest.raises(ValueError, match="not utf-8 text"):
        parse_project_page(html, "text/html", page)
    with pytest.raises(ValueError, match="unknown charset"):
        parse_project_page(html, "text/html; charset=k3-nonesuch", page)


def test_a_yanked_file_is_marked_in_both_formats() -> None:
    page = "https://x/simple/torch/"
    html = (
        '<a href="t-1.whl#sha256=' + SHA_A + '" data-yanked="">t-1.whl</a>'
        '<a href="t-2.whl#sha256=' + SHA_B + '">t-2.whl</a>'
    )
    listed = parse_simple_html(html, page)
    assert (listed["t-1.whl"].yanked, listed["t-2.whl"].yanked) == (True, False)
    files = [
        {"filename": "t-1.whl", "url": "t-1.whl", "hashes": {}, "yanked": "broken"},
        {"filename": "t-2.whl", "url": "t-2.whl", "hashes": {}, "yanked": False},
    ]
    listed = parse_simple_json({"files": files}, page)
    assert (listed["t-1.whl"].yanked, listed["t-2.whl"].yanked) == (True, False)


def test_write_index_replaces_the_directory_and_drops_stale_files(tmp_path: Path) -> None:
    out = tmp_path / "site"
    write_index({"cu129/old/index.html": b'<meta name="pypi:repository-version">'}, out)
    write_index(render_index([cu129("x86_64")]), out)
    assert not (out / "cu129" / "old").exists()
    assert (out / "cu129" / "k3-kernels" / "index.html").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["site"]


def test_write_index_never_replaces_a_link_or_a_directory_holding_other_files(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "userdocs"
    mine.mkdir()
    (mine / "precious.md").write_text("mine")
    (tmp_path / "link").symlink_to(mine)
    (tmp_path / "site" / "cu129" / "k3-kernels").mkdir(parents=True)
    (tmp_path / "site" / "cu129" / "k3-kernels" / "notes.txt").write_text("mine")
    for directory in (tmp_path / "link", mine, tmp_path / "site", tmp_path):
        with pytest.raises(FileError, match="release replaces the index directory whole"):
            write_index(render_index([cu129("x86_64")]), directory)
    assert (mine / "precious.md").read_text() == "mine"
    assert (tmp_path / "site" / "cu129" / "k3-kernels" / "notes.txt").is_file()
    with pytest.raises(FileError, match="is a folder no index has"):
        write_index({"a.json": b"{}"}, tmp_path / "site", owned=is_flat_file)
    # a site of its own, its pages named as an index's are: its name alone said "an index"
    site = tmp_path / "handwritten"
    (site / "about").mkdir(parents=True)
    (site / "index.html").write_text("<h1>My project</h1>")
    (site / "about" / "index.html").write_text("<p>about</p>")
    with pytest.raises(FileError, match="is no page of a simple index"):
        write_index(render_index([cu129("x86_64")]), site)
    assert (site / "index.html").read_text() == "<h1>My project</h1>"


def test_a_filename_listed_twice_is_kept_twice_in_page_order() -> None:
    name = "k3_kernels-0.1.0-py3-none-any.whl"
    html = f'<a href="{name}#sha256={SHA_A}">{name}</a><a href="{name}#sha256={SHA_B}">{name}</a>'
    listed = project_files(html.encode(), "text/html", "https://idx.test/k3-kernels/")
    assert [f.sha256 for f in listed] == [SHA_A, SHA_B]
    assert (
        parse_project_page(html.encode(), "text/html", "https://idx.test/k3-kernels/")[name].sha256
        == SHA_B
    )  # by filename, the last listing stands
    document = {
        "files": [{"filename": name, "url": name, "hashes": {"sha256": s}} for s in (SHA_A, SHA_B)]
    }
    as_json = project_files(
        json.dumps(document).encode(), SIMPLE_JSON, "https://idx.test/k3-kernels/"
    )
    assert [f.sha256 for f in as_json] == [SHA_A, SHA_B]


def test_a_root_page_names_its_projects_in_html_and_json() -> None:
    root = "https://idx.test/simple/"
    html = b'<a href="k3-kernels/">k3-kernels</a><a href="/simple/other/">Other</a>'
    page = parse_index_page(html, "text/html", root)
    assert page.root
    assert page.projects == (
        ("k3-kernels", "https://idx.test/simple/k3-kernels/"),
        ("Other", "https://idx.test/simple/other/"),
    )
    document = {"meta": {"api-version": "1.1"}, "projects": [{"name": "K3_Kernels"}]}
    page = parse_index_page(json.dumps(document).encode(), SIMPLE_JSON, root)
    assert page.projects == (("K3_Kernels", "https://idx.test/simple/k3-kernels/"),)
    project = parse_index_page(
        b'<a href="x.whl">k3_kernels-0.1.0-py3-none-any.whl</a>', "text/html", root
    )
    assert not project.root
    assert [f.name for f in project.files] == ["k3_kernels-0.1.0-py3-none-any.whl"]


def test_a_json_pages_metadata_hash_is_read_in_any_case() -> None:
    """PEP 691's hashes are hex; an upper-case one named the file's lower-case hash wrong."""
    upper = "F33A" * 16
    body = json.dumps(
        {"files": [{"filename": "a.whl", "url": "a.whl", "hashes": {"sha256": SHA_A},
                    "core-metadata": {"sha256": upper}}]}
    )  # fmt: skip
    listed = parse_project_page(
        body.encode(), "application/vnd.pypi.simple.v1+json", "https://x/simple/a/"
    )
    assert listed["a.whl"].metadata_sha256 == upper.lower()


def test_a_tag_left_open_at_the_end_is_scanned_once_and_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # At the end of its input, the parser of Python before 3.11.13 read each `<` of a tag
    # left open as text and scanned the rest of the page again from the next one: a page of
    # 8,000 `<a href='x'` took 32 s in release audit. Fed only, the first such tag ends the
    # parse; the links before it are listed.
    scans: list[int] = []
    original = HTMLParser.check_for_whole_start_tag

    def counted(parser: HTMLParser, i: int) -> int:
        scans.append(i)
        return original(parser, i)

    monkeypatch.setattr(HTMLParser, "check_for_whole_start_tag", counted)
    name = "k3_kernels-0.1.0-py3-none-any.whl"
    page = f'<a href="{name}#sha256={SHA_A}">{name}</a>' + "<a href='x'" * 5_000
    listed = project_files(page.encode(), "text/html", "https://idx.test/k3-kernels/")
    assert [(f.name, f.sha256) for f in listed] == [(name, SHA_A)]
    assert len(scans) == 2  # the link's tag, then the first one left open


def test_a_project_page_of_more_files_than_any_projects_is_refused_unheld() -> None:
    """A page of 1.1 million links to one wheel took 1 GB to hold; past MAX_PAGE_FILES
    files the page is not a simple index page, in HTML and JSON. A root page's links to
    projects are no files, however many."""
    url = "https://idx.test/simple/k3/"
    many = MAX_PAGE_FILES + 1
    html = "".join(f'<a href="k3-{n}.whl">k3-{n}.whl</a>' for n in range(many))
    with pytest.raises(ValueError, match=f"a project page of more than {MAX_PAGE_FILES} files"):
        parse_project_page(html.encode(), "text/html", url)
    files = [{"filename": f"k3-{n}.whl", "url": f"k3-{n}.whl", "hashes": {}} for n in range(many)]
    body = json.dumps({"meta": {"api-version": "1.1"}, "name": "k3", "files": files}).encode()
    with pytest.raises(ValueError, match=f"a project page of more than {MAX_PAGE_FILES} files"):
        parse_project_page(body, SIMPLE_JSON, url)
    root = "".join(f'<a href="/simple/p{n}/">p{n}</a>' for n in range(many))
    page = parse_index_page(root.encode(), "text/html", "https://idx.test/simple/")
    assert page.root
    assert len(page.projects) == many


def test_a_json_page_of_more_values_than_any_projects_is_refused_undecoded() -> None:
    """A PEP 691 page of 780,000 files of two values each took 530 MB to decode before its
    files were counted: its values are counted first (at most MAX_PAGE_VALUES, forty a file
    of the most files a page may list), in a project page and in an index page; a page of
    as many files as a page may list, PyPI's fields each and a requires-python of several
    clauses, is read."""
    url = "https://idx.test/simple/k3/"
    commas = "," * MAX_PAGE_VALUES  # counted wherever they stand, strings included
    body = f'{{"meta": {{"api-version": "1.1"}}, "name": "k3", "files": [], "x": "{commas}"}}'
    many = f"more than {MAX_PAGE_VALUES:,} values"
    with pytest.raises(ValueError, match=many):
        project_files(body.encode(), SIMPLE_JSON, url)
    with pytest.raises(ValueError, match=many):
        parse_index_page(body.encode(), SIMPLE_JSON, url)
    pypi_like = json.dumps({
        "filename": "k3-1.0-py3-none-any.whl", "url": "k3-1.0-py3-none-any.whl",
        "hashes": {"sha256": "0" * 64}, "core-metadata": {"sha256": "0" * 64},
        "data-dist-info-metadata": {"sha256": "0" * 64},
        "requires-python": ">=2.7,!=3.0.*,!=3.1.*,!=3.2.*,!=3.3.*,!=3.4.*",
        "size": 1, "upload-time": "2026-01-01T00:00:00.000000Z", "yanked": False,
        "provenance": None,
    })  # fmt: skip
    a_file = sum(map(pypi_like.count, ",[{")) + 1  # and the , before the next
    assert a_file * MAX_PAGE_FILES + 10 < MAX_PAGE_VALUES  # the page's own 10, with room
    listed = ",".join([pypi_like] * 1_000)
    body = f'{{"meta": {{"api-version": "1.1"}}, "name": "k3", "files": [{listed}]}}'
    assert len(project_files(body.encode(), SIMPLE_JSON, url)) == 1_000
    # a root page's values are bounded as its links are, past a project page's bound
    root = f'{{"meta": {{"api-version": "1.1"}}, "projects": [{{"name": "p", "x": "{commas}"}}]}}'
    page = parse_index_page(root.encode(), SIMPLE_JSON, "https://idx.test/simple/")
    assert [name for name, _ in page.projects] == ["p"]


def test_a_page_of_more_links_than_any_index_has_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """3.9 million links that name no file (the files' bound counts none of them) took
    880 MB; a root page's projects are links too. PyPI's root page has about 700,000."""
    assert simple_index.MAX_PAGE_LINKS == 1_000_000
    monkeypatch.setattr(simple_index, "MAX_PAGE_LINKS", 100)
    url = "https://idx.test/simple/"
    for link in ('<a href="x">y</a>', '<a href="/simple/p/">p</a>', "<a>"):
        with pytest.raises(ValueError, match=r"^a page of more than 100 links, past any index's$"):
            parse_index_page((link * 101).encode(), "text/html", url)
    page = parse_index_page(('<a href="/simple/p/">p</a>' * 100).encode(), "text/html", url)
    assert page.root
    assert len(page.projects) == 100


@pytest.mark.parametrize(
    ("tag", "rest"),
    [
        ("<div" + " a=b" * 1_000_000 + ">", "<p>"),  # 15 million of these took 12 GB
        ("<a" + " a=b" * 1_000_000 + ' href="x">y</a>', ""),
        # a quoted > that a scan for the first > would take for the tag's end
        ("<a b'c d=\"'>\"" + " a=b" * 1_000_000 + ">", ""),
    ],
)
def test_a_page_of_a_tag_longer_than_any_real_ones_is_refused_unparsed(tag: str, rest: str) -> None:
    name = "k3_kernels-0.1.0-py3-none-any.whl"
    page = (f'<a href="{name}">{name}</a>' + tag + rest + "x" * 100_000).encode()
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"^a tag of more than 131072 characters$"):
            project_files(page, "text/html", "https://idx.test/k3-kernels/")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 80 * 2**20, f"{peak} bytes to read a page of {len(page)}"
    left_open = f'<a href="{name}">{name}</a><div' + " a=b" * 1_000_000  # no > after it
    assert [f.name for f in project_files(left_open.encode(), "text/html", "https://x/")] == [
        name
    ]  # ends the parse, as ever
    many = "<a" + " a=b" * 30_000 + f' href="{name}">{name}</a>'  # 120 KB: no real link is
    assert [f.name for f in project_files(many.encode(), "text/html", "https://idx.test/")] == [
        name
    ]
