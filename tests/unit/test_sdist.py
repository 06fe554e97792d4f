"""The sdist's pure parts: the fixed metadata that makes two builds give the same bytes,
which cell builds it, and its manifest section (what it must hold: test_sdistfile.py)."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from release.building.sdist import linked_out, normalised
from release.building.stage import kept_sdist
from release.matrix import load_matrix
from release.records.manifest import (
    DestinationRef,
    Manifest,
    SdistEntry,
    from_json,
    sdist_cell_of,
    to_json,
)

REPO = Path(__file__).resolve().parents[2]
EPOCH = 1_700_000_000
PKG_INFO = b"Metadata-Version: 2.4\nName: k3-kernels\nVersion: 0.1.0\n"


def tarball(members: list[tuple[str, bytes, int, int]], *, gzip_time: float) -> bytes:
    """A .tar.gz as a backend may write it: members (name, data, mtime, mode) in the given
    order, owned by a build user, a gzip header dated `gzip_time` naming a temporary file."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data, mtime, mode in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), mtime, mode
            info.uid, info.gid, info.uname, info.gname = 1001, 1001, "runner", "docker"
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename=".tmp-sdist", mode="wb", fileobj=out, mtime=gzip_time) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


FILES = [
    ("k3_kernels-0.1.0/PKG-INFO", PKG_INFO, EPOCH + 50, 0o664),
    ("k3_kernels-0.1.0/tools/build.sh", b"#!/bin/sh\n", EPOCH - 10, 0o775),
    ("k3_kernels-0.1.0/src/k3.py", b"x = 1\n", EPOCH + 99, 0o600),
]


def test_two_builds_of_the_same_files_give_the_same_bytes() -> None:
    first = tarball(FILES, gzip_time=1_800_000_000)
    second = tarball(list(reversed(FILES)), gzip_time=1_800_000_777)
    assert first != second
    assert normalised(first, EPOCH) == normalised(second, EPOCH)


def test_the_written_sdist_is_dated_no_later_than_the_epoch_and_owned_by_nobody() -> None:
    data = normalised(tarball(FILES, gzip_time=1_800_000_000), EPOCH)
    assert data[4:8] == b"\0\0\0\0"  # gzip MTIME
    assert data[3] & 0x08 == 0  # no FNAME
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        got = [(m.name, m.mtime, m.mode, m.uid, m.uname) for m in tar.getmembers()]
        contents = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    assert got == [
        ("k3_kernels-0.1.0/PKG-INFO", EPOCH, 0o644, 0, ""),
        ("k3_kernels-0.1.0/src/k3.py", EPOCH, 0o644, 0, ""),
        ("k3_kernels-0.1.0/tools/build.sh", EPOCH - 10, 0o755, 0, ""),
    ]
    assert contents == {name: data for name, data, _, _ in FILES}


def test_a_link_in_an_sdist_is_refused() -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        link = tarfile.TarInfo("k3_kernels-0.1.0/etc")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        tar.addfile(link)
    with pytest.raises(ValueError, match=r"k3_kernels-0\.1\.0/etc: not a file or a directory"):
        normalised(raw.getvalue(), EPOCH)


def test_the_default_variants_first_cell_builds_it_and_a_labelled_matrix_has_none() -> None:
    matrix = load_matrix(REPO / "matrix.yaml")
    cell = sdist_cell_of(matrix.cells)
    assert cell is not None
    assert (cell.id, cell.local_label, cell.destination.kind) == ("13.0-x86_64", None, "pypi")
    labelled = [c for c in matrix.cells if c.local_label is not None]
    assert sdist_cell_of(labelled) is None
    on_github = [replace(c, local_label=None) for c in labelled]  # no label, not PyPI
    assert sdist_cell_of(on_github) is None


PYPI = DestinationRef(
    name="pypi", kind="pypi", index_url="https://pypi.org/simple/", max_file_size=100 * 2**20,
    repository_url="https://upload.pypi.org/legacy/", max_project_size=10 * 2**30,
)  # fmt: skip
SDIST = SdistEntry(
    filename="k3_kernels-0.1.0.tar.gz", version="0.1.0", size=63864, sha256="a" * 64,
    destination=PYPI,
)  # fmt: skip


def test_the_manifest_keeps_the_sdist_apart_from_the_wheels() -> None:
    plain = Manifest(project="k3-kernels", version="0.1.0", wheels=())
    assert "sdist" not in to_json(plain)  # a manifest of wheels alone is as it was
    document = to_json(replace(plain, sdist=SDIST))
    assert document["wheels"] == []
    assert document["sdist"]["filename"] == "k3_kernels-0.1.0.tar.gz"
    assert from_json(document).sdist == SDIST
    merged = plain.merged(replace(plain, sdist=SDIST))
    assert merged.sdist == SDIST
    assert replace(plain, sdist=SDIST).merged(plain).sdist == SDIST


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"filename": "../k3_kernels-0.1.0.tar.gz"}, "is not an sdist filename"),
        ({"filename": "k3_kernels-0.1.0+cu129.tar.gz"}, "is not an sdist filename"),
        ({"filename": "k3_kernels-0.1.0.zip"}, "is not an sdist filename"),
        ({"sha256": "A" * 64}, "sha256: not 64 lower-case hex digits"),
        ({"size": -1}, "size: negative"),
    ],
)
def test_a_malformed_sdist_section_is_refused(change: dict[str, object], message: str) -> None:
    document = to_json(Manifest(project="k3-kernels", version="0.1.0", wheels=(), sdist=SDIST))
    document["sdist"].update(change)
    with pytest.raises(ValueError, match=message):
        from_json(document)


def test_an_sdist_bound_anywhere_but_pypi_is_refused() -> None:
    document = to_json(Manifest(project="k3-kernels", version="0.1.0", wheels=(), sdist=SDIST))
    document["sdist"]["destination"] = {
        "name": "github", "kind": "github", "index_url": None, "max_file_size": 1,
        "repository": "k3-project/k3-kernels", "tag": "v0.1.0",
    }  # fmt: skip
    with pytest.raises(ValueError, match="an sdist goes to PyPI only"):
        from_json(document)


def test_a_build_of_other_cells_keeps_the_versions_intact_sdist(tmp_path: Path) -> None:
    data = normalised(tarball(FILES, gzip_time=0), EPOCH)
    (tmp_path / SDIST.filename).write_bytes(data)
    kept = replace(SDIST, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    earlier = Manifest(project="k3-kernels", version="0.1.0", wheels=(), sdist=kept)
    now = Manifest(project="k3-kernels", version="0.1.0", wheels=())
    assert kept_sdist(earlier, now, tmp_path) == kept
    assert kept_sdist(None, now, tmp_path) is None
    assert kept_sdist(earlier, replace(now, version="0.2.0"), tmp_path) is None
    (tmp_path / SDIST.filename).write_bytes(data[:-1] + b"\1")
    assert kept_sdist(earlier, now, tmp_path) is None  # changed since: left out


def linked_project(tmp_path: Path) -> Path:
    """A project whose `pkg/keys` links to a directory outside it, `pkg/key.pem` to a file
    outside it, and `pkg/same` to its own `pkg/inner`."""
    outside = tmp_path / "home" / ".ssh"
    outside.mkdir(parents=True)
    (outside / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    project = tmp_path / "project"
    (project / "pkg" / "inner").mkdir(parents=True)
    (project / "pkg" / "inner" / "a.py").write_text("")
    (project / "pkg" / "keys").symlink_to(outside, target_is_directory=True)
    (project / "pkg" / "key.pem").symlink_to(outside / "id_rsa")
    (project / "pkg" / "same").symlink_to("inner", target_is_directory=True)
    return project


@pytest.mark.parametrize(
    ("member", "link"),
    [("pkg/keys/id_rsa", "pkg/keys"), ("pkg/key.pem", "pkg/key.pem")],
    ids=["directory", "file"],
)
def test_a_member_taken_through_a_symlink_out_of_the_project_names_the_link(
    tmp_path: Path, member: str, link: str
) -> None:
    """Issue 49, F5: a backend follows links; what they point to outside is refused."""
    project = linked_project(tmp_path)
    members = [*FILES, (f"k3_kernels-0.1.0/{member}", b"key", EPOCH, 0o600)]
    found = linked_out(tarball(members, gzip_time=0), project)
    target = tmp_path / "home" / ".ssh" / ("id_rsa" if link.endswith(".pem") else "")
    assert found == (
        f"k3_kernels-0.1.0/{member} is {project / link} -> {str(target).rstrip('/')}, "
        f"a symlink out of {project}"
    )


def test_links_inside_the_project_and_files_the_build_made_are_no_problem(tmp_path: Path) -> None:
    project = linked_project(tmp_path)
    members = [*FILES, ("k3_kernels-0.1.0/pkg/same/a.py", b"", EPOCH, 0o644)]
    assert linked_out(tarball(members, gzip_time=0), project) is None
