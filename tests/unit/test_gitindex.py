"""The git index's pure core (release.remote.gitindex): this project's pages merged into the
files a branch already holds, other projects' pages never written or deleted, the label's
root kept listing exactly the project folders it holds; and the environment git gets, with
the token as a header for the remote's origin only. The edge, against real repositories,
is tests/integration/test_gitindex.py."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pytest

from release.credentials import Secret
from release.destinations.index import IndexFile, render_index, root_page
from release.matrix.gitindex import git_url_problem, token_secret_problem
from release.remote.gitindex import GitIndexTarget, git_environment, unquoted_path
from release.remote.gitpages import PackagePages, merge_pages, pages_to_read
from release.remote.simple_index import MAX_TAG

PROJECT = "sgl-deep-gemm"
WHEEL = "sgl_deep_gemm-0.1.4+{label}-py3-none-manylinux2014_x86_64.whl"
# another project's pages as another tool writes them (sglang's scripts: no DOCTYPE, CRLF
# here, no newline at the end), and the label's root as it lists them
OTHERS = {
    "index.html": b"<h1>Wheels</h1>\n<a href='cu130/'>cu130</a>",
    "README.md": b"# whl\n",
    "cu130/index.html": b'<!DOCTYPE html>\n<a href="sgl-kernel/">sgl-kernel</a>\n',
    "cu130/sgl-kernel/index.html": b'<a href="https://h/k.whl#sha256=00">k.whl</a><br>\r\n',
    "nightly/cu129/sglang/index.html": b"<a href='s.whl'>s.whl</a>",
}


def rendered(*labels: str) -> dict[str, bytes]:
    files = [
        IndexFile(
            filename=WHEEL.format(label=label),
            url=f"https://github.com/sgl-project/whl/releases/download/v0.1.4/{WHEEL.format(label=label)}",
            sha256=label[-1] * 64,
        )
        for label in labels
    ]
    return render_index(files)


def roots(label: str, names: Sequence[str]) -> Mapping[str, bytes]:
    html, json = root_page(f"Simple index ({label})", names)
    return {"index.html": html, "index.json": json}


def merged(
    tree: Mapping[str, bytes], pages: PackagePages, directory: str = ""
) -> tuple[dict[str, bytes], tuple[str, ...]]:
    """The branch's files after the merge, and what it deleted."""
    read = {p: tree[p] for p in pages_to_read(tree, pages, directory)}
    change = merge_pages(tree, read, pages, directory=directory, root_pages=roots)
    after = {p: d for p, d in tree.items() if p not in change.deletes}
    return {**after, **change.writes}, change.deletes


def test_a_projects_pages_are_its_folders_under_each_label() -> None:
    pages = PackagePages.from_rendered(rendered("cu129", "cu130"), "SGL_Deep.Gemm")
    assert pages.project == PROJECT
    assert {label: sorted(files) for label, files in pages.pages.items()} == {
        "cu129": ["index.html", "index.json"],
        "cu130": ["index.html", "index.json"],
    }
    with_nccl = render_index([], {"nccl/cu12.txt": b"nvidia-nccl-cu12==2.30.7\n"})
    with pytest.raises(ValueError, match=r"nccl/cu12.txt: not a page of sgl-deep-gemm"):
        PackagePages.from_rendered({**rendered("cu130"), **with_nccl}, PROJECT)
    with pytest.raises(ValueError, match=r"cu130/sgl-kernel/index.html: not a page of"):
        PackagePages.from_rendered({"cu130/sgl-kernel/index.html": b""}, PROJECT)
    with pytest.raises(ValueError, match=r"'\.\.' cannot be a folder"):
        PackagePages.from_rendered({f"../{PROJECT}/index.html": b""}, PROJECT)


def test_other_projects_pages_are_never_written_or_deleted() -> None:
    pages = PackagePages.from_rendered(rendered("cu129", "cu130"), PROJECT)
    after, deleted = merged(OTHERS, pages)
    assert deleted == ()
    for path, data in OTHERS.items():
        if path != "cu130/index.html":
            assert after[path] == data, path
    assert after[f"cu130/{PROJECT}/index.html"] == rendered("cu130")[f"cu130/{PROJECT}/index.html"]
    # the roots of both labels list every project folder they hold, other projects' too
    assert b'href="sgl-kernel/"' in after["cu130/index.html"]
    assert b'href="sgl-deep-gemm/"' in after["cu130/index.html"]
    assert b"sgl-kernel" not in after["cu129/index.html"]
    assert set(after) - set(OTHERS) == {
        "cu129/index.html", "cu129/index.json",
        f"cu129/{PROJECT}/index.html", f"cu129/{PROJECT}/index.json",
        "cu130/index.json", f"cu130/{PROJECT}/index.html", f"cu130/{PROJECT}/index.json",
    }  # fmt: skip


def test_a_root_that_lists_exactly_the_folders_stays_as_it_is() -> None:
    in_sync = {
        **OTHERS,
        "cu130/index.html": b'<a href="sgl-kernel/">a</a>\n<a href="./sgl-deep-gemm/">b</a>',
        f"cu130/{PROJECT}/index.html": b"old",
    }
    after, _ = merged(in_sync, PackagePages.from_rendered(rendered("cu130"), PROJECT))
    assert after["cu130/index.html"] == in_sync["cu130/index.html"]
    assert "cu130/index.json" not in after
    # one linking a folder by another spelling (a host serves K3_Kernels/ and k3-kernels/
    # apart), one listing a project whose folder is gone, or a JSON root that lists another
    # set, is rewritten
    spelt = {**in_sync, "cu130/index.html": b'<a href="sgl-kernel/">a</a><a href="Sgl_Deep_Gemm/">'}
    after, _ = merged(spelt, PackagePages.from_rendered(rendered("cu130"), PROJECT))
    assert b'href="sgl-deep-gemm/"' in after["cu130/index.html"]
    assert b"Sgl_Deep_Gemm" not in after["cu130/index.html"]
    stale = {**in_sync, "cu130/index.html": in_sync["cu130/index.html"] + b'<a href="x/">x</a>'}
    after, _ = merged(stale, PackagePages.from_rendered(rendered("cu130"), PROJECT))
    assert b'href="x/"' not in after["cu130/index.html"]
    odd_json = {**in_sync, "cu130/index.json": b'{"projects": [{"name": "sgl-kernel"}]}'}
    after, _ = merged(odd_json, PackagePages.from_rendered(rendered("cu130"), PROJECT))
    assert (
        after["cu130/index.json"] == roots("cu130", ["sgl-deep-gemm", "sgl-kernel"])["index.json"]
    )


def test_a_folder_with_a_json_or_htm_page_alone_stays_listed_in_the_rewritten_root() -> None:
    before = {
        **OTHERS,
        "cu130/zeta/index.json": b'{"meta": {"api-version": "1.1"}, "files": []}',
        "cu130/beta/index.htm": b"<a href='b.whl'>b.whl</a>",
    }
    after, _ = merged(before, PackagePages.from_rendered(rendered("cu130"), PROJECT))
    for name in ("sgl-kernel", "zeta", "beta", PROJECT):
        assert f'href="{name}/"'.encode() in after["cu130/index.html"], name


@pytest.mark.parametrize(
    "href",
    [
        "https://mirror.example/cu130/omega/",
        "/cu130-mirror/omega/",
        "../mirror/omega/",
        "https:/mirror.example/cu130/omega/",
        "\\\\mirror.example\\cu130\\omega/",
        "./../cu129/omega/",
        "x/../../cu129/omega/",
        "%2e%2e/cu129/omega/",
        "deeper/omega/",
        "https://mirror.example/cu130/sgl-kernel/",  # a folder of that name is here too
    ],
)
def test_a_root_that_links_a_page_elsewhere_is_never_rewritten_without_it(href: str) -> None:
    before = {
        **OTHERS,
        "cu130/index.html": OTHERS["cu130/index.html"] + f'<a href="{href}">o</a>'.encode(),
    }
    with pytest.raises(
        ValueError, match=r"cu130/index.html links .*(omega|sgl-kernel)/', a page elsewhere"
    ):
        merged(before, PackagePages.from_rendered(rendered("cu130"), PROJECT))


@pytest.mark.parametrize(
    "page",
    [
        b'<base href="https://mirror.example/cu130/">'
        b'<a href="sgl-kernel/">k</a><a href="omega/">o</a>',
        ('<a href="sgl-kernel/">k</a><a href="https://mirror.example/omega/">o</a>').encode(
            "utf-16"
        ),
    ],
)
def test_a_root_read_against_a_base_or_in_utf16_still_keeps_its_links_elsewhere(
    page: bytes,
) -> None:
    before = {**OTHERS, "cu130/index.html": page}
    with pytest.raises(ValueError, match=r"a page elsewhere"):
        merged(before, PackagePages.from_rendered(rendered("cu130"), PROJECT))


def test_a_root_past_a_pages_bounds_is_refused_naming_it() -> None:
    """Another's root page on the branch is read within a served page's bounds (MAX_TAG,
    MAX_PAGE_LINKS): one <div> of 15 million attributes took 12 GB to parse."""
    before = {**OTHERS, "cu130/index.html": b"<div " + b"a " * (MAX_TAG // 2 + 1) + b">"}
    said = f"a tag of more than {MAX_TAG} characters"
    with pytest.raises(ValueError, match=f"cu130/index.html on the branch is not a page .*{said}"):
        merged(before, PackagePages.from_rendered(rendered("cu130"), PROJECT))


def test_a_root_linking_our_folder_elsewhere_is_not_in_sync() -> None:
    """The root links the project by the right name, to another host: not its folder."""
    before = {
        **OTHERS,
        "cu130/index.html": OTHERS["cu130/index.html"]
        + f'<a href="https://evil.example/{PROJECT}/">x</a>'.encode(),
        f"cu130/{PROJECT}/index.html": b"old",
    }
    with pytest.raises(ValueError, match=r"evil.example.*a page elsewhere"):
        merged(before, PackagePages.from_rendered(rendered("cu130"), PROJECT))


def test_an_alias_folder_stays_listed_and_a_folder_that_names_no_project_is_none() -> None:
    pages = PackagePages.from_rendered(rendered("cu130"), PROJECT)
    listing = {
        **OTHERS,
        "cu130/a#b/index.html": b"",
        "cu130/sp ace/index.html": b"",
        "cu130/we\rird/index.html": b"",
    }
    change = merge_pages(
        listing, {"cu130/index.html": OTHERS["cu130/index.html"]}, pages, directory="",
        root_pages=roots, others={"cu130/zeta": "a symlink"},
    )  # fmt: skip
    root = change.writes["cu130/index.html"]
    assert b'href="zeta/"' in root
    assert b'href="sgl-kernel/"' in root
    for odd in (b"a#b", b"sp ace", b"we\rird"):
        assert odd not in root
        assert odd not in change.writes["cu130/index.json"]


def test_a_root_page_that_is_a_symlink_is_not_replaced() -> None:
    pages = PackagePages.from_rendered(rendered("cu130"), PROJECT)
    listing = {p: d for p, d in OTHERS.items() if p != "cu130/index.html"}
    with pytest.raises(ValueError, match=r"cu130/index.html is a symlink on the branch"):
        merge_pages(
            listing, {}, pages, directory="", root_pages=roots,
            others={"cu130/index.html": "a symlink"},
        )  # fmt: skip


def test_the_projects_folder_is_replaced_whole_in_the_labels_it_has_pages_for() -> None:
    before = {
        **OTHERS,
        f"cu130/{PROJECT}/index.html": b"appended twice",
        f"cu130/{PROJECT}/stale.html": b"left by an older tool",
        f"cu128/{PROJECT}/index.html": b"a label this release set has no wheel for",
    }
    after, deleted = merged(before, PackagePages.from_rendered(rendered("cu130"), PROJECT))
    assert deleted == (f"cu130/{PROJECT}/stale.html",)
    assert after[f"cu130/{PROJECT}/index.html"].startswith(b"<!DOCTYPE html>")
    assert after[f"cu128/{PROJECT}/index.html"] == before[f"cu128/{PROJECT}/index.html"]
    assert "cu128/index.html" not in after, "a label it writes nothing to is not touched"


def test_the_index_may_be_a_directory_of_the_repository() -> None:
    before = {f"whl/{path}": data for path, data in OTHERS.items()} | {"index.html": b"site"}
    pages = PackagePages.from_rendered(rendered("cu130"), PROJECT)
    after, _ = merged(before, pages, directory="whl")
    assert after["index.html"] == b"site"
    assert f"whl/cu130/{PROJECT}/index.json" in after
    assert b"sgl-kernel" in after["whl/cu130/index.html"]
    with pytest.raises(ValueError, match="not a directory inside the repository"):
        merged(before, pages, directory="../up")


@pytest.mark.parametrize(
    ("others", "files", "said"),
    [
        # an alias a maintainer keeps (cu129 -> cu130), a file, a submodule where a label goes
        ({"cu129": "a symlink"}, {}, "cu129 is a symlink on the branch, where the index's folder"),
        ({}, {"cu129": b"x"}, "cu129 is a file on the branch, where the index's folder cu129/"),
        ({"cu129": "a submodule"}, {}, "cu129 is a submodule on the branch"),
        # a folder where a label's root page goes
        ({}, {"cu130/index.html/keep": b""}, "cu130/index.html is a folder on the branch"),
    ],
)
def test_what_another_keeps_in_the_way_of_a_page_is_refused_not_replaced(
    others: dict[str, str], files: dict[str, bytes], said: str
) -> None:
    tree = {**OTHERS, **files}
    pages = PackagePages.from_rendered(rendered("cu129", "cu130"), PROJECT)
    read = {p: tree[p] for p in pages_to_read(tree, pages, "")}
    with pytest.raises(ValueError, match=re.escape(said)):
        merge_pages(tree, read, pages, directory="", root_pages=roots, others=others)


def test_in_the_projects_own_folder_everything_is_replaced() -> None:
    tree = {**OTHERS, f"cu130/{PROJECT}/index.html/old": b""}
    others = {f"cu130/{PROJECT}/link": "a symlink"}
    pages = PackagePages.from_rendered(rendered("cu130"), PROJECT)
    read = {p: tree[p] for p in pages_to_read(tree, pages, "")}
    change = merge_pages(tree, read, pages, directory="", root_pages=roots, others=others)
    assert set(change.deletes) == {f"cu130/{PROJECT}/index.html/old", f"cu130/{PROJECT}/link"}


@pytest.mark.parametrize(
    ("printed", "path"),
    [
        ("cu130/plain/index.html", "cu130/plain/index.html"),
        ('"cu130/old\\rfile"', "cu130/old\rfile"),
        ('"cu130/caf\\303\\251/a \\"q\\" \\\\"', 'cu130/caf\u00e9/a "q" \\'),
    ],
)
def test_a_path_git_quoted_reads_back_byte_for_byte(printed: str, path: str) -> None:
    assert unquoted_path(printed) == path


def test_a_path_that_is_not_utf8_reads_as_the_file_system_reads_it() -> None:
    """As os.fsdecode: a git command given the path gets its bytes back."""
    path = unquoted_path('"cu130/acme-kernel/\\377.html"')
    assert path == "cu130/acme-kernel/\udcff.html"
    assert path.encode("utf-8", "surrogateescape") == b"cu130/acme-kernel/\xff.html"


def test_another_projects_file_named_in_no_utf8_is_left_as_it_is() -> None:
    """One such file anywhere on a shared index's branch blocked every publish of every
    other project; now only this project's own folder must be text."""
    odd = "cu130/acme-kernel/\udcff.html"
    tree = {**OTHERS, odd: b"x"}
    pages = PackagePages.from_rendered(rendered("cu130"), PROJECT)
    read = {p: tree[p] for p in pages_to_read(tree, pages, "")}
    change = merge_pages(tree, read, pages, directory="", root_pages=roots)
    assert odd not in change.writes
    assert odd not in change.deletes
    assert f"cu130/{PROJECT}/index.html" in change.writes


def test_a_file_named_in_no_utf8_in_the_projects_own_folder_is_refused_by_name() -> None:
    odd = f"cu130/{PROJECT}/\udcff.html"
    tree = {**OTHERS, odd: b"x"}
    pages = PackagePages.from_rendered(rendered("cu130"), PROJECT)
    read = {p: tree[p] for p in pages_to_read(tree, pages, "")}
    with pytest.raises(ValueError, match=r"'cu130/sgl-deep-gemm/\\udcff.html' in this project"):
        merge_pages(tree, read, pages, directory="", root_pages=roots)


def test_the_token_reaches_git_as_a_header_of_the_remotes_origin_only() -> None:
    token = "ghp_" + "s3cr3t" * 6
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "GH_PAT_FOR_WHL_RELEASE": token,
        "GITHUB_TOKEN": "ghs_jobtoken0000",
        "GIT_TRACE_CURL": "1",
        "GIT_DIR": "/elsewhere",
        "GIT_CONFIG_KEY_0": "credential.helper",
    }
    target = GitIndexTarget(
        url="https://github.com/sgl-project/whl.git",
        branch="gh-pages",
        directory="",
        token=Secret(token),
    )
    env, secrets = git_environment(environ, target)
    assert env["GIT_CONFIG_COUNT"] == "2"
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.com/.extraheader"
    assert (env["GIT_CONFIG_KEY_1"], env["GIT_CONFIG_VALUE_1"]) == ("http.followRedirects", "false")
    assert env["GIT_CONFIG_VALUE_0"].startswith("Authorization: basic ")
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    for name in ("GH_PAT_FOR_WHL_RELEASE", "GITHUB_TOKEN", "GIT_TRACE_CURL", "GIT_DIR"):
        assert name not in env
    assert token in secrets
    assert all(token not in value for value in env.values()), "only its base64, in the header"
    assert env["GIT_CONFIG_VALUE_0"].removeprefix("Authorization: basic ") in secrets
    # a path on disk gets no header, and nothing without a token
    on_disk = GitIndexTarget(url="/srv/whl.git", branch="b", directory="", token=Secret(token))
    assert "GIT_CONFIG_COUNT" not in git_environment(environ, on_disk)[0]
    anonymous = GitIndexTarget(url=target.url, branch="b", directory="")
    assert git_environment(environ, anonymous)[1] == ()


@pytest.mark.parametrize(
    "url",
    [
        "ssh://git@github.com/sgl-project/whl.git",
        "ssh://deploy_bot@git.example.org:2222/whl.git",
        "git@github.com:sgl-project/whl.git",
        "https://github.com/sgl-project/whl.git",
        "file:///srv/whl.git",
    ],
)
def test_a_git_url_with_ssh_s_user_name_alone_is_taken(url: str) -> None:
    assert git_url_problem(url) is None


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ssh://git:hunter22@github.com/w.git", "holds credentials"),
        ("https://git@github.com/w.git", "holds credentials"),  # a token as https's user
        ("ssh://git@-oProxyCommand=id/w.git", "holds credentials"),
        ("ssh://-oProxyCommand=id/w.git", "is not a git URL"),
    ],
)
def test_a_password_or_an_https_user_is_refused(url: str, said: str) -> None:
    problem = git_url_problem(url)
    assert problem is not None
    assert said in problem
    assert "hunter22" not in problem


@pytest.mark.parametrize(
    "pasted",
    [
        "ghp_" + "SEKRET" + "0" * 30,
        "github_pat_11ABCDEFG0" + "x" * 60,
        "gho_" + "a1B2" * 9,
        "ghs_" + "a1B2" * 9,
        "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAw",
        "glpat-" + "x1Y2" * 5,
        "Zx8Kq2Lm9Vb4Nw7Rt5Yp3Hs6Jd1Fg0Ac",  # no prefix: 32 random letters and digits
    ],
)
def test_a_token_pasted_as_token_secret_is_not_shown(pasted: str) -> None:
    # the token was echoed: "ghp_... does not say it holds a secret"
    problem = token_secret_problem(pasted)
    assert problem is not None
    assert problem.startswith("looks like a token itself, not the name of the secret")
    assert pasted[:8] not in problem
    assert token_secret_problem("GH_PAT_FOR_WHL_RELEASE") is None
