"""release.destinations: what each kind answers the stages, without a request (the kinds'
requests are the integration tests' against pypiserver and the stand-in GitHub)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from packaging.version import Version

from release.destinations.base import ProvenanceRoute
from release.destinations.pypi_publisher import PypiPublisher
from release.destinations.reach import Reach
from release.destinations.registry import KINDS, find_kind, kind_of
from release.errors import ConfigError, PublishError
from release.matrix import GithubDestination, PypiDestination, S3Destination
from release.records.manifest import IndexRef, WheelEntry
from release.records.published import PublishedFile
from tests.integration.wheels import github_destination, pypi_destination

API = "https://api.github.com"
GITHUB = GithubDestination(
    name="whl", repository="k3-org/whl", tag_template="v{version}", api_url=API,
    index_url="https://k3-org.github.io/whl/", max_file_size=2**30,
)  # fmt: skip
PYPI = PypiDestination(
    name="pypi", repository_url="https://upload.pypi.org/legacy/",
    index_url="https://pypi.org/simple/", max_file_size=100 * 2**20,
)  # fmt: skip
S3 = S3Destination(
    name="nightly", bucket="k3", prefix="k3-kernels/", endpoint=None, region="auto",
    index_url="https://k3.example.com/k3-kernels/",
)  # fmt: skip
WHEEL = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"


def reach(index_base_url: str | None = None) -> Reach:
    token = {"GITHUB_TOKEN": "ghp_" + "d4" * 18}
    return Reach(token, command="release verify", index_base_url=index_base_url)


def entry(destination_ref: object, *, label: str | None = "cu129") -> WheelEntry:
    return WheelEntry(
        cell="12.9-x86_64", cuda="12.9", arch="x86_64", filename=WHEEL, version="0.1.0+cu129",
        local_label=label, size=1, sha256="0" * 64, sms=(), ptx=None, toolchain={},
        destination=destination_ref,  # type: ignore[arg-type]
    )  # fmt: skip


def published(kind: str, url: str, index_url: str | None = None) -> PublishedFile:
    return PublishedFile(
        filename=WHEEL, sha256="0" * 64, size=1, kind=kind, destination=kind, arch="x86_64",
        local_label=None if kind == "pypi" else "cu129", url=url, index_url=index_url,
    )  # fmt: skip


def test_each_kind_is_found_by_its_name_and_an_unknown_one_is_none() -> None:
    assert [kind_of(name).name for name in KINDS] == ["pypi", "github", "s3", "git-index"]
    assert find_kind("gitlab") is None


def test_only_pypi_refuses_replace_and_takes_the_sdist() -> None:
    assert {name: (k.can_replace, k.takes_sdist) for name, k in KINDS.items()} == {
        "pypi": (False, True),
        "github": (True, False),
        "s3": (True, False),
        "git-index": (True, False),
    }


def test_where_verify_reads_each_kinds_listing_and_attestations() -> None:
    assert {name: (k.index_check, k.attestations) for name, k in KINDS.items()} == {
        "pypi": ("listing", ProvenanceRoute.PYPI),
        "github": ("index", ProvenanceRoute.GITHUB),
        "s3": ("index", None),
        "git-index": ("index", None),
    }


def test_a_github_wheel_is_found_in_the_index_of_its_label() -> None:
    github = kind_of("github")
    ref = github_destination(API, index_url="https://k3-org.github.io/whl/")
    publisher = github.publisher(ref, reach())
    assert github.index_url(entry(ref), publisher, reach()) == "https://k3-org.github.io/whl/cu129/"
    assert github.index_url(entry(ref, label=None), publisher, reach()) is None
    moved = reach(index_base_url="https://mirror.example.com/w")
    assert github.index_url(entry(ref), publisher, moved) == "https://mirror.example.com/w/cu129/"
    assert github.index_source(ref, reach()) == f"{API} k3-org/k3-kernels"
    assert kind_of("pypi").index_source(pypi_destination("http://127.0.0.1:1/"), reach()) is None


def test_a_pypi_wheel_is_found_in_its_own_index() -> None:
    ref = pypi_destination("http://127.0.0.1:1/")
    publisher = kind_of("pypi").publisher(ref, reach())
    assert isinstance(publisher, PypiPublisher)
    assert kind_of("pypi").index_url(entry(ref), publisher, reach()) == ref.index_url


def test_writing_github_without_a_token_is_refused_before_any_request() -> None:
    bare = Reach({}, command="release publish")
    with pytest.raises(PublishError, match="github: no GITHUB_TOKEN"):
        kind_of("github").publisher(github_destination(API), bare)


def test_an_s3_destination_takes_no_release() -> None:
    ref = replace(github_destination(API), kind="s3", name="nightly")
    with pytest.raises(PublishError, match="nightly: s3 destinations take no release"):
        kind_of("s3").publisher(ref, reach())


def test_the_signer_is_the_github_repository_at_the_releases_tag() -> None:
    github = kind_of("github")
    assert github.signer(GITHUB, "0.1.0+cu129") == ("k3-org/whl", "refs/tags/v0.1.0")
    assert github.signer(GITHUB, "not a version") == ("k3-org/whl", None)
    assert kind_of("pypi").signer(PYPI, "0.1.0") is None
    assert github.keeps_releases(GITHUB) == "k3-org/whl"
    assert kind_of("pypi").keeps_releases(PYPI) is None


def test_a_tag_names_its_version_under_the_template() -> None:
    github = kind_of("github")
    assert github.release_version(GITHUB, "v0.2.0") == Version("0.2.0")
    with pytest.raises(ConfigError) as refused:
        github.release_version(GITHUB, "nightly")
    assert refused.value.problems == (
        "--tag nightly: not a tag of the form 'v{version}' with a version in it",
    )
    assert kind_of("pypi").release_version(PYPI, "v0.2.0") is None


def test_downloads_get_the_token_on_github_and_index_credentials_on_pypi() -> None:
    with_keys = Reach(
        {"GITHUB_TOKEN": "ghp_" + "d4" * 18, "TWINE_API_KEY": "pypi-key-5678"}, command="x"
    )
    asset = published("github", "https://github.com/k3-org/whl/releases/download/v0.1.0/x.whl")
    github = kind_of("github").file_auth([asset], with_keys)
    assert (list(github.bearer), github.basic) == (["https://github.com"], {})
    on_pypi = published("pypi", "https://files.example.com/x.whl", "https://pypi.org/simple/")
    pypi = kind_of("pypi").file_auth([on_pypi], with_keys)
    assert pypi.bearer == {}
    assert sorted(pypi.basic) == ["https://pypi.org"]  # a PyPI token: shown to PyPI alone
    index_key = Reach({"TWINE_API_KEY": "index-key-5678"}, command="x")
    on_index = kind_of("pypi").file_auth([on_pypi], index_key)
    assert sorted(on_index.basic) == ["https://files.example.com", "https://pypi.org"]
    s3 = kind_of("s3").file_auth([published("s3", "https://k3.example.com/x.whl")], with_keys)
    assert (s3.bearer, s3.basic) == ({}, {})
    assert kind_of("pypi").index_login(PYPI, with_keys) == (
        "https://upload.pypi.org/legacy/", ["https://pypi.org/simple/"]
    )  # fmt: skip
    assert kind_of("github").index_login(GITHUB, with_keys) is None
    assert kind_of("s3").index_login(S3, with_keys) is None


def test_a_github_destination_with_a_token_secret_is_written_with_that_token_only() -> None:
    ref = replace(github_destination(API), name="whl", token_secret="WHL_TOKEN")
    only_own = Reach({"GITHUB_TOKEN": "ghp_" + "d4" * 18}, command="release publish")
    with pytest.raises(PublishError, match="whl: no WHL_TOKEN in the environment"):
        kind_of("github").publisher(ref, only_own)
    whl = "ghp_" + "e5" * 18
    publisher = kind_of("github").publisher(ref, Reach({"WHL_TOKEN": whl}, command="x"))
    assert whl not in publisher.client.scrub(whl)  # type: ignore[attr-defined]


def test_only_a_git_index_takes_an_index_and_it_takes_no_release() -> None:
    index = IndexRef(
        name="whl-index", kind="git-index", index_url="https://x.example/", url="/srv/whl.git",
        branch="gh-pages", directory="",
    )  # fmt: skip
    for name in ("pypi", "github", "s3"):
        with pytest.raises(PublishError, match=f"whl-index: {name} destinations list no other"):
            kind_of(name).push_index(index, {}, reach(), project="k3-kernels", version="0.1.0")
    ref = replace(github_destination(API), kind="git-index", name="whl-index")
    with pytest.raises(PublishError, match="whl-index: git-index destinations take no release"):
        kind_of("git-index").publisher(ref, reach())
    with pytest.raises(PublishError, match="whl-index: cannot write the index: no page of"):
        kind_of("git-index").push_index(index, {}, reach(), project="k3-kernels", version="0.1.0")
