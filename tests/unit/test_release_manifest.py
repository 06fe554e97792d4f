"""release-manifest.json: the bytes publish writes, and what verify --tag reads back."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from release.fsutil import UnreadableDocument
from release.matrix import load_matrix
from release.records.manifest import Manifest, WheelEntry
from release.records.release_manifest import (
    RELEASE_MANIFEST,
    ReleaseWheel,
    parse_release_manifest,
    release_manifest_bytes,
)

REPO = Path(__file__).resolve().parents[2]
CELLS = {c.id: c for c in load_matrix(REPO / "matrix.yaml").cells}


def manifest() -> Manifest:
    entries = []
    for cell_id in ("13.0-x86_64", "12.9-aarch64"):
        cell = CELLS[cell_id]
        data = cell_id.encode()
        entries.append(
            WheelEntry.of(
                cell,
                filename=cell.wheel_filename,
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
                sms=tuple(str(s) for s in cell.sms),
                ptx=str(cell.ptx),
                toolchain={"device_compiler": "nvcc"},
            )
        )
    return Manifest(project="k3-kernels", version="0.1.0", wheels=tuple(entries))


EXPECTED = """\
{
  "project": "k3-kernels",
  "schema": 1,
  "version": "0.1.0",
  "wheels": [
    {
      "arch": "aarch64",
      "destination": "github",
      "filename": "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_aarch64.whl",
      "kind": "github",
      "local_label": "cu129",
      "sha256": "%s",
      "size": 12
    },
    {
      "arch": "x86_64",
      "destination": "pypi",
      "filename": "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl",
      "kind": "pypi",
      "local_label": null,
      "sha256": "%s",
      "size": 11
    }
  ]
}
"""


def test_the_bytes_are_sorted_indented_and_end_in_a_newline() -> None:
    digests = (
        hashlib.sha256(b"12.9-aarch64").hexdigest(),
        hashlib.sha256(b"13.0-x86_64").hexdigest(),
    )
    assert release_manifest_bytes(manifest()) == (EXPECTED % digests).encode()
    assert RELEASE_MANIFEST == "release-manifest.json"


def test_what_is_written_reads_back_as_the_manifests_wheels() -> None:
    built = manifest()
    read = parse_release_manifest(release_manifest_bytes(built))
    assert read == sorted((ReleaseWheel.of(w) for w in built.wheels), key=lambda w: w.filename)
    assert {w.filename: (w.kind, w.destination, w.local_label) for w in read} == {
        w.filename: (w.destination.kind, w.destination.name, w.local_label) for w in built.wheels
    }


def test_missing_arch_and_a_label_that_is_no_string_are_tolerated() -> None:
    data = {"wheels": [{"filename": "a", "sha256": "s", "size": "3", "kind": "github",
                        "destination": "d", "local_label": 4}]}  # fmt: skip
    (wheel,) = parse_release_manifest(json.dumps(data).encode())
    assert (wheel.size, wheel.arch, wheel.local_label) == (3, "", None)


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (b"{", UnreadableDocument, "Expecting property name"),
        (b"[]", ValueError, "not a release manifest"),
        (b'{"wheels": {}}', ValueError, "not a release manifest"),
        (b'{"wheels": [1]}', ValueError, "a wheel is not an object"),
        (b'{"wheels": [{"sha256": "s"}]}', KeyError, "filename"),
        (b'{"wheels": [{"filename": "a", "sha256": "s", "size": "x"}]}', ValueError, "int()"),
    ],
)
def test_what_is_not_a_release_manifest_raises(
    data: bytes, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        parse_release_manifest(data)


def test_an_attested_wheel_says_so_and_reads_back_and_the_others_keep_their_bytes() -> None:
    built = manifest()
    signed = "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    data = release_manifest_bytes(built, attested=[signed])
    wheels = {w["filename"]: w for w in json.loads(data)["wheels"]}
    assert wheels[signed]["attested"] is True
    other = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_aarch64.whl"
    assert "attested" not in wheels[other]  # an unattested wheel's keys are as before
    assert {w.filename: w.attested for w in parse_release_manifest(data)} == {
        signed: True,
        other: False,
    }
