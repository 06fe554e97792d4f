"""The manifest and the publish record: a missing, broken or binary file is a ConfigError
that names the file, never a traceback."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from release.errors import ConfigError, FileError
from release.records.manifest import Manifest, read_manifest, write_manifest
from release.records.published import read_record

EMPTY = Manifest(project="k3-kernels", version="0.1.0", wheels=())
READERS: dict[str, tuple[Callable[[Path], Any], str, str]] = {
    "manifest": (read_manifest, "manifest", "run `release build` first"),
    "record": (lambda p: read_record(p, EMPTY), "publish record", "run `release publish` first"),
}


@pytest.mark.parametrize("reader", READERS, ids=str)
def test_a_missing_file_names_it_and_the_command_that_writes_it(
    reader: str, tmp_path: Path
) -> None:
    read, _, hint = READERS[reader]
    path = tmp_path / "absent.json"
    with pytest.raises(FileError) as caught:
        read(path)
    assert caught.value.exit_code == 8  # docs/commands.md's exit 8: "a file that cannot be read"
    assert caught.value.message == f"{path}: no such file"
    assert caught.value.hint is not None
    assert caught.value.hint.startswith(hint)


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe\x00binary"], ids=["json", "utf8"])
@pytest.mark.parametrize("reader", READERS, ids=str)
def test_an_unreadable_file_is_named_with_what_it_should_be(
    reader: str, content: bytes, tmp_path: Path
) -> None:
    read, what, _ = READERS[reader]
    path = tmp_path / "broken.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        read(path)
    assert caught.value.message.startswith(f"{path}: not a readable {what}: ")


GOOD_WHEEL = {
    "cell": "13.0-x86_64",
    "cuda": "13.0",
    "arch": "x86_64",
    "filename": "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl",
    "version": "0.1.0",
    "local_label": None,
    "size": 10,
    "sha256": "a" * 64,
    "sms": ["80"],
    "ptx": "80",
    "toolchain": {},
    "destination": {"name": "pypi", "kind": "pypi", "max_file_size": 100, "index_url": None},
}
PYPI = {"name": "pypi", "kind": "pypi", "max_file_size": 100, "index_url": None}
GH = {"name": "gh", "kind": "github", "max_file_size": 100, "repository": "o/r", "tag": "v1"}
HOSTILE: dict[str, tuple[str, object]] = {
    "filename-path": ("filename", "../../k3_kernels-0.1.0-py3-none-any.whl"),
    "filename-not-a-wheel": ("filename", "setup.py"),
    "sms-not-strings": ("sms", [80, {"x": 1}]),
    "sha256-short": ("sha256", "abc"),
    "sha256-newline": ("sha256", "a" * 64 + "\n"),  # `$` of a pattern matched before it
    "size-negative": ("size", -1),
    "size-string": ("size", "10"),
    "toolchain-nested": ("toolchain", {"a": {"b": 1}}),
    "label-number": ("local_label", 129),
    "destination-kind": ("destination", {"name": "x", "kind": "ftp", "max_file_size": 1}),
    "destination-list": ("destination", ["pypi"]),
    "device-bytes-list": ("device_bytes", [1, 2]),
    "device-bytes-label": ("device_bytes", {"../x": 1}),
    "device-bytes-negative": ("device_bytes", {"sm_90": -1}),
    "device-bytes-bool": ("device_bytes", {"sm_90": True}),
    # each was accepted, and failed later at its use (publish: "not asked", exit 9)
    "destination-repository": ("destination", {**GH, "repository": "a"}),
    "destination-size": ("destination", {**GH, "max_file_size": -5}),
    "destination-size-huge": ("destination", {**GH, "max_file_size": 10**500}),
    "destination-tag-newline": ("destination", {**GH, "tag": "v1\nx"}),
    "destination-api-credentials": ("destination", {**GH, "api_url": "https://u:p@api/"}),
    # each was accepted, and reached a request path, a file or a message as it was
    "destination-tag-traversal": ("destination", {**GH, "tag": "../../../user/repos"}),
    "destination-tag-query": ("destination", {**GH, "tag": "v1?x=1"}),
    "destination-api-not-http": ("destination", {**GH, "api_url": "file:///etc"}),
    "destination-upload-not-http": ("destination", {**PYPI, "repository_url": "javascript:x"}),
    "version-not-the-filenames": ("version", "9.9.9"),
    "version-not-a-version": ("version", "../x"),
    "label-not-the-filenames": ("local_label", "cu129"),
    "cuda-not-a-version": ("cuda", "13.0/../../x"),
    "cuda-newline": ("cuda", "13.0\n"),
    "sms-newline": ("sms", ["90\n"]),
    "device-bytes-label-newline": ("device_bytes", {"sm_90\n": 1}),
    "arch-a-path": ("arch", "x86_64/../y"),
    "sms-not-an-sm": ("sms", ["sm_90", "../x"]),
    "ptx-not-an-sm": ("ptx", "compute_90\n"),
    "filename-another-project": ("filename", "other-0.1.0-py3-none-manylinux_2_28_x86_64.whl"),
    # a name publish --dry-run printed raw: a line of its own in a CI log
    "destination-name-newline": ("destination", {**PYPI, "name": "w\n::error::x"}),
    "destination-name-escape": ("destination", {**GH, "name": "\x1b[2Jgh"}),
}


@pytest.mark.parametrize("case", HOSTILE, ids=str)
def test_a_malformed_manifest_field_is_a_config_error_naming_it(case: str, tmp_path: Path) -> None:
    key, value = HOSTILE[case]
    document = {
        "schema": 1,
        "project": "k3-kernels",
        "version": "0.1.0",
        "wheels": [{**GOOD_WHEEL, key: value}],
    }
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError) as caught:
        read_manifest(path)
    assert caught.value.message.startswith(f"{path}: wheels[0]")
    assert len(caught.value.message) < 300


def test_the_well_formed_entry_reads(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    document = {"schema": 1, "project": "k3-kernels", "version": "0.1.0", "wheels": [GOOD_WHEEL]}
    path.write_text(json.dumps(document))
    assert read_manifest(path).wheels[0].filename == GOOD_WHEEL["filename"]
    assert read_manifest(path).wheels[0].device_bytes == ()  # written before they were measured
    sized = {**GOOD_WHEEL, "device_bytes": {"sm_80": 52456, "ptx_80": 47744}}
    path.write_text(json.dumps({**document, "wheels": [sized]}))
    entry = read_manifest(path).wheels[0]
    assert entry.device_bytes == (("sm_80", 52456), ("ptx_80", 47744))
    write_manifest(read_manifest(path), path)
    assert json.loads(path.read_text())["wheels"][0]["device_bytes"] == sized["device_bytes"]


LISTED_WHEEL = {
    **GOOD_WHEEL,
    "filename": "k3_kernels-0.1.0+cu130-py3-none-manylinux_2_28_x86_64.whl",
    "version": "0.1.0+cu130",
    "local_label": "cu130",
    "destination": {
        "name": "whl", "kind": "github", "max_file_size": 100, "repository": "sgl-project/whl",
        "tag": "v0.1.0", "api_url": "https://api.github.com", "token_secret": "WHL_TOKEN",
        "index": "whl-index", "index_url": "https://sgl-project.github.io/whl/",
    },
}  # fmt: skip
GIT_INDEX = {
    "name": "whl-index", "kind": "git-index", "index_url": "https://sgl-project.github.io/whl/",
    "url": "https://github.com/sgl-project/whl.git", "repository": "sgl-project/whl",
    "branch": "gh-pages", "directory": "", "token_secret": "WHL_TOKEN",
}  # fmt: skip


def test_the_index_that_lists_a_destination_is_recorded_beside_its_wheels(tmp_path: Path) -> None:
    """What publish needs to write a git index comes with the release: the manifest's
    `indexes`, one for each `index` a wheel's destination names, each checked."""
    path = tmp_path / "manifest.json"
    document = {
        "schema": 1, "project": "k3-kernels", "version": "0.1.0",
        "wheels": [GOOD_WHEEL, LISTED_WHEEL], "indexes": [GIT_INDEX],
    }  # fmt: skip
    path.write_text(json.dumps(document))
    manifest = read_manifest(path)
    ((index),) = manifest.indexes
    assert (index.name, index.url, index.branch, index.directory) == (
        "whl-index", "https://github.com/sgl-project/whl.git", "gh-pages", "",
    )  # fmt: skip
    assert manifest.wheels[1].destination.token_secret == "WHL_TOKEN"
    write_manifest(manifest, path)
    assert json.loads(path.read_text())["indexes"] == [GIT_INDEX]

    def index_with(**changed: str | None) -> dict[str, object]:
        return {**document, "indexes": [{**GIT_INDEX, **changed}]}

    for broken, problem in [
        ({**document, "indexes": []}, "its destination is listed by 'whl-index', which "
         "manifest.indexes does not record"),
        (index_with(kind="github"), "manifest.indexes[0].kind: 'github' is not git-index"),
        (index_with(branch=None), "manifest.indexes[0]: git-index needs url and branch"),
        (index_with(token_secret="WHL"), "manifest.indexes[0].token_secret: WHL does not say it "
         "holds a secret"),
        # what git would read as an option, another transport, or a credential: the manifest
        # is held to matrix.yaml's rules (git ran `--upload-pack=touch X;true`)
        (index_with(url="--upload-pack=touch X;true"),
         "manifest.indexes[0].url: '--upload-pack=touch X;true' is not a git URL"),
        (index_with(url="ext::sh -c id"),
         "manifest.indexes[0].url: 'ext::sh -c id' is not a git URL"),
        (index_with(url="ssh://-oProxyCommand=id/x"),
         "manifest.indexes[0].url: 'ssh://-oProxyCommand=id/x' is not a git URL"),
        (index_with(url="https://u:hunter22@h/w.git"),
         "manifest.indexes[0].url: 'https://***@h/w.git' holds credentials"),
        (index_with(directory=".git"),
         "manifest.indexes[0].directory: '.git' is not a relative path"),
        (index_with(repository="a/.."),
         "manifest.indexes[0].repository: 'a/..'"),
    ]:  # fmt: skip
        path.write_text(json.dumps(broken))
        with pytest.raises(ConfigError) as caught:
            read_manifest(path)
        assert problem in caught.value.message


@pytest.mark.parametrize(
    "files",
    [
        {"not": "a list"},
        [["a list"]],
        [{"filename": GOOD_WHEEL["filename"], "url": {"x": 1}}],
        [{"filename": GOOD_WHEEL["filename"], "url": "file:///etc/passwd"}],
        [{"filename": GOOD_WHEEL["filename"], "url": "https://x/", "index_url": 5}],
        # what pins would write into a requirement file: a credential, a line of its own
        [{"filename": GOOD_WHEEL["filename"], "url": "https://u:SECRETSENTINEL@x/a.whl"}],
        [{"filename": GOOD_WHEEL["filename"], "url": "https://x/a.whl?token=SECRETSENTINEL"}],
        [{"filename": GOOD_WHEEL["filename"], "url": "https://x/a.whl\n--index-url https://e/"}],
        [{"filename": GOOD_WHEEL["filename"], "url": "https://x/", "index_url": "https://x/ y"}],
        [
            {"filename": GOOD_WHEEL["filename"], "url": "https://x/a.whl"},
            {"filename": GOOD_WHEEL["filename"], "url": "https://y/a.whl"},
        ],
    ],
    ids=[
        "files-object",
        "file-list",
        "url-object",
        "url-file",
        "index-number",
        "url-userinfo",
        "url-token",
        "url-newline",
        "index-space",
        "listed-twice",
    ],
)
def test_a_malformed_publish_record_is_a_config_error(files: object, tmp_path: Path) -> None:
    manifest_path = tmp_path / "manifest.json"
    manifest_path.write_text(
        json.dumps(
            {"schema": 1, "project": "k3-kernels", "version": "0.1.0", "wheels": [GOOD_WHEEL]}
        )
    )
    record = tmp_path / "published.json"
    record.write_text(json.dumps({"schema": 1, "files": files}))
    with pytest.raises(ConfigError) as caught:
        read_record(record, read_manifest(manifest_path))
    assert str(record) in caught.value.message
    assert "SECRETSENTINEL" not in caught.value.message


def test_a_record_that_is_no_regular_file_is_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "published.json"
    os.mkfifo(fifo)  # a read would wait for a writer forever
    with pytest.raises(FileError, match=r"not a regular file"):
        read_record(fifo, EMPTY)
