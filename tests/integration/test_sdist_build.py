"""The sdist of csrc through its own PEP 517 backend (`python -m build --sdist`, run by
release.proc): two checkouts of the same commit, their files of other times, give the same
bytes; `release build --sdist` refuses a nightly and says which build makes the sdist."""

from __future__ import annotations

import os
import shutil
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from release.building.sdist import build_sdist, from_the_sdist
from release.building.settings import BuildSettings
from release.cli import main
from release.errors import BuildError
from release.fsutil import sha256_file
from release.matrix import load_matrix
from release.records.manifest import DestinationRef, Manifest, SdistEntry, sdist_cell_of

REPO = Path(__file__).resolve().parents[2]
EPOCH = 1_700_000_000


def checkout(where: Path, mtime: int) -> Path:
    shutil.copytree(REPO / "csrc", where / "csrc", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "matrix.yaml", where / "matrix.yaml")
    for path in (where / "csrc").rglob("*"):
        os.utime(path, (mtime, mtime))
    return where


def built(where: Path, tmp_path: Path) -> Path:
    matrix = load_matrix(where / "matrix.yaml")
    out = where / "dist"
    out.mkdir()
    settings = BuildSettings(
        matrix=matrix, cells=matrix.cells, out=out, cache_dir=tmp_path / "cache", epoch=EPOCH,
        environ=dict(os.environ),
    )  # fmt: skip
    cell = sdist_cell_of(matrix.cells)
    assert cell is not None
    entry = build_sdist(settings, cell, out / "sdist.log")
    assert entry.destination.name == "pypi"
    return out / entry.filename


def test_two_checkouts_give_the_same_sdist(tmp_path: Path) -> None:
    first = built(checkout(tmp_path / "a", EPOCH - 100), tmp_path)
    second = built(checkout(tmp_path / "b", EPOCH + 100_000), tmp_path)
    assert first.name == "k3_kernels-0.1.0.tar.gz"
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        names = tar.getnames()
        assert {m.mtime for m in tar.getmembers()} == {EPOCH}  # csrc's backend dates them
    assert "k3_kernels-0.1.0/pyproject.toml" in names
    assert "k3_kernels-0.1.0/tools/k3_build_backend.py" in names


def test_build_sdist_refuses_a_nightly_and_names_the_build_that_makes_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    matrix = str(REPO / "matrix.yaml")
    code = main(["build", "--matrix", matrix, "--sdist", "--channel", "nightly", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--sdist with --channel nightly: an sdist is built for a release's publish only" in err
    code = main(["build", "--matrix", matrix, "--sdist", "--cuda", "12.9", "--dry-run"])
    assert code == 0
    assert "sdist: built by the build of 13.0-x86_64, not by this one" in capsys.readouterr().err
    # a matrix with no PyPI cell without a label: every build job still passes --sdist
    labelled = checkout(tmp_path, EPOCH) / "matrix.yaml"
    text = labelled.read_text(encoding="utf-8")
    labelled.write_text(
        text.replace("destination: pypi      #", "local-label: cu130\n    destination: github  #"),
        encoding="utf-8",
    )
    assert main(["build", "--matrix", str(labelled), "--sdist", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "sdist: none, as no cell of the matrix goes to PyPI without a local label" in err


def test_compare_rebuilds_the_sdists_cell_out_of_the_unpacked_sdist(tmp_path: Path) -> None:
    where = checkout(tmp_path / "a", EPOCH)
    sdist = built(where, tmp_path)
    matrix = load_matrix(where / "matrix.yaml")
    entry = SdistEntry(
        filename=sdist.name, version="0.1.0", size=sdist.stat().st_size,
        sha256=sha256_file(sdist), destination=DestinationRef.of(matrix.cells[0]),
    )  # fmt: skip
    reference = Manifest(project="k3-kernels", version="0.1.0", wheels=(), sdist=entry)
    cells = matrix.select(cuda=["13.0"])
    settings = BuildSettings(matrix=matrix, cells=cells, out=tmp_path, cache_dir=tmp_path)
    into = tmp_path / "unpacked"
    rebuilt, name = from_the_sdist(settings, reference, sdist.parent, into)
    root = into / "k3_kernels-0.1.0"
    assert name == "k3_kernels-0.1.0.tar.gz"
    assert rebuilt.matrix.project.path == root
    assert {c.project.path for c in (*rebuilt.cells, *rebuilt.matrix.cells)} == {root}
    assert [c.id for c in rebuilt.cells] == [c.id for c in cells]
    assert (root / "pyproject.toml").read_bytes() == (REPO / "csrc/pyproject.toml").read_bytes()
    # a job without the sdist's cell, or no sdist beside the reference: as they were
    other = replace(settings, cells=matrix.select(cuda=["12.9"]))
    assert from_the_sdist(other, reference, sdist.parent, tmp_path / "x") == (other, None)
    assert from_the_sdist(settings, reference, tmp_path, tmp_path / "y") == (settings, None)
    sdist.write_bytes(sdist.read_bytes() + b"\0")
    with pytest.raises(BuildError, match="not the sdist the reference manifest records"):
        from_the_sdist(settings, reference, sdist.parent, tmp_path / "z")


def test_a_file_linked_from_out_of_the_project_stops_the_sdist(tmp_path: Path) -> None:
    """Issue 49, F5: csrc's backend reads a file through its symlink, as backends do; one
    that points out of the project (a private key) is refused by name, nothing written."""
    key = tmp_path / "home" / ".ssh" / "id_rsa"
    key.parent.mkdir(parents=True)
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    where = checkout(tmp_path / "a", EPOCH)
    link = where / "csrc" / "tools" / "deploy_key"
    link.symlink_to(key)
    with pytest.raises(BuildError) as caught:
        built(where, tmp_path)
    assert caught.value.message == (
        f"k3_kernels-0.1.0.tar.gz: k3_kernels-0.1.0/tools/deploy_key is {link} -> {key}, "
        f"a symlink out of {where / 'csrc'}"
    )
    assert not list((where / "dist").glob("*.tar.gz"))


ONE_CELL = """project: csrc
defaults: {arches: [x86_64], sms: [90], manylinux: "2_28"}
cuda:
  "13.0": {destination: pypi}
destinations:
  pypi: {kind: pypi}
"""


def test_a_project_file_named_unprintably_stops_the_sdist_saying_what_an_sdist_holds(
    tmp_path: Path,
) -> None:
    """A file whose name holds a line break, which csrc's backend takes as it takes any
    file: refused by name, and the hint says what an sdist must be (it used to say the sdist
    was not this release's, which no build of this release could mend)."""
    where = checkout(tmp_path / "a", EPOCH)
    (where / "csrc" / "tools" / "notes\nsetup.py").write_text("x\n")
    with pytest.raises(BuildError) as caught:
        built(where, tmp_path)
    assert caught.value.message == (
        "k3_kernels-0.1.0.tar.gz: member 'k3_kernels-0.1.0/tools/notes\\nsetup.py': its name "
        "holds a control or format character or a byte that is not UTF-8, which a listing "
        "shows as something else or not at all"
    )
    assert caught.value.hint is not None
    assert caught.value.hint.startswith("the project's backend wrote it so; ")
    assert "one top directory k3_kernels-0.1.0/, each once and named printably" in (
        caught.value.hint
    )
    assert not list((where / "dist").glob("*.tar.gz"))
