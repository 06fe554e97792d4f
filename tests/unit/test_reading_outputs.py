"""The manifest and the publish record: a missing, broken or binary file is a ConfigError
that names the file, never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from release.errors import ConfigError
from release.manifest import Manifest, read_manifest
from release.verify import read_record

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
    with pytest.raises(ConfigError) as caught:
        read(path)
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
