"""The artifacts' trust rules, without a build: cache entries are verified on read, the
manifest of dist/ is exactly one build, cache keys hold no paths, files get the umask's
mode, a rebuild that differs names the first member that does, and one published under a
build tag takes its original's place in dist/."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import os
import shutil
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from release.backends import BuildInputs
from release.building.cache import (
    MAX_CACHED_WHEEL,
    MAX_SOURCE_FILE,
    WheelCache,
    project_files,
    source_digest,
    wheel_cache_key,
)
from release.building.compare import compare, first_difference
from release.building.pipeline import cell_environment
from release.building.settings import DEFAULT_EPOCH, parse_epoch
from release.errors import ConfigError, FileError
from release.fsutil import current_umask, write_atomic
from release.matrix import Cell, load_matrix
from release.records.dist import (
    Reconciled,
    dist_problems,
    entry_problems,
    load_dist,
    reconcile,
    write_rebuilt,
)
from release.records.manifest import Manifest, WheelEntry, read_manifest, write_manifest
from release.toolchain.cacheroot import default_cache_dir, toolchain_cache
from release.wheelfile import wheel_facts
from release.wheelrewrite import with_build_tag
from tests.integration import wheels

REPO = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(REPO / "matrix.yaml")
CELLS = {c.id: c for c in MATRIX.cells}
IDENTITY = {"device_compiler": "nvcc 13.0.88", "device_packages": "x", "host_cc": "zig 0.17.1"}
RECIPE = {"release": "0.1.0", "wheel": "0.48.0", "zlib": "1.3"}


def wheel_bytes(
    members: Sequence[tuple[str, bytes]], *, date: tuple[int, ...] = (1980, 1, 1)
) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            y, m, d = date[:3]
            info = zipfile.ZipInfo(name, date_time=(y, m, d, 0, 0, 0))
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()


def cell_wheel(
    cell: Cell,
    *,
    version: str | None = None,
    name: str = "k3-kernels",
    date: tuple[int, ...] = (1980, 1, 1),
) -> bytes:
    version = version or str(cell.version)
    dist_info = f"k3_kernels-{version}.dist-info"
    return wheel_bytes(
        [
            ("k3_kernels/__init__.py", b""),
            (
                f"{dist_info}/METADATA",
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
            ),
            (
                f"{dist_info}/WHEEL",
                f"Wheel-Version: 1.0\nTag: py3-none-{cell.platform_tag}\n".encode(),
            ),
            (f"{dist_info}/RECORD", b""),
        ],
        date=date,
    )


def entry_for(cell: Cell, data: bytes) -> WheelEntry:
    return WheelEntry.of(
        cell,
        filename=cell.wheel_filename,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        sms=tuple(str(s) for s in cell.sms),
        ptx=str(cell.ptx),
        toolchain={},
    )


# -- the wheel cache ------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path: Path) -> WheelCache:
    store = WheelCache(tmp_path / "wheels")
    store.put("key", "a.whl", b"the wheel's bytes")
    return store


def test_a_cache_entry_reads_back_verified(cache: WheelCache) -> None:
    found = cache.get("key", "a.whl")
    assert found.data == b"the wheel's bytes"
    assert found.damage is None


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:5])


def drop_digest(path: Path) -> None:
    path.with_name(path.name + ".sha256").unlink()


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def to_dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def sparse(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(MAX_CACHED_WHEEL + 1)  # no block of it is written


def sparse_digest(path: Path) -> None:
    sparse(path.with_name(path.name + ".sha256"))


DAMAGES = [flip, truncate, drop_digest, fifo, to_dev_zero, sparse, sparse_digest]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__)
def test_a_damaged_cache_entry_is_reported_and_removed(cache: WheelCache, damage: object) -> None:
    """Each is a damaged entry, removed; the last four are read no further than their file
    type and size (a FIFO hung the build past SIGTERM, /dev/zero and a sparse file of
    100 GiB ended it in a MemoryError)."""
    assert callable(damage)
    damage(cache.entry("key") / "a.whl")
    found = cache.get("key", "a.whl")
    assert found.data is None
    assert found.damage is not None
    assert "a.whl was damaged" in found.damage
    assert not cache.entry("key").exists()
    assert cache.get("key", "a.whl") == type(found)(data=None)


def test_an_entry_that_is_a_link_is_removed_and_never_written_through(
    cache: WheelCache, tmp_path: Path
) -> None:
    """The new wheel was written through a linked entry, over a file outside the cache."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.whl").write_bytes(b"someone else's file")
    shutil.rmtree(cache.entry("key"))
    cache.entry("key").symlink_to(outside)
    found = cache.get("key", "a.whl")
    assert found.data is None
    assert found.damage is not None
    assert "not a directory of the cache's own" in found.damage
    assert not cache.entry("key").is_symlink()
    cache.entry("key").symlink_to(outside)
    cache.put("key", "a.whl", b"the wheel's bytes")
    assert (outside / "a.whl").read_bytes() == b"someone else's file"
    assert cache.get("key", "a.whl").data == b"the wheel's bytes"


def test_a_missing_entry_is_no_damage(tmp_path: Path) -> None:
    found = WheelCache(tmp_path).get("nothing", "a.whl")
    assert found.data is None
    assert found.damage is None


def test_default_cache_dir_precedence() -> None:
    home = Path("/home/u")
    assert default_cache_dir({}, home) == home / ".cache" / "cuda-wheel-release"
    assert default_cache_dir({"XDG_CACHE_HOME": "/x"}, home) == Path("/x/cuda-wheel-release")
    env = {"XDG_CACHE_HOME": "/x", "RELEASE_CACHE_DIR": "/r"}
    assert default_cache_dir(env, home) == Path("/r")


def test_the_toolchains_live_in_the_cache_roots_toolchains_folder() -> None:
    assert toolchain_cache(Path("/r")) == Path("/r/toolchains")


# -- cache keys and the build environment ----------------------------------------------------


def test_the_wheel_cache_key_depends_on_content_not_on_paths() -> None:
    cell = CELLS["13.0-x86_64"]
    key = wheel_cache_key(cell, "src", IDENTITY, epoch=1, recipe=RECIPE)
    assert key == wheel_cache_key(cell, "src", dict(IDENTITY), epoch=1, recipe=RECIPE)
    assert key != wheel_cache_key(cell, "src2", IDENTITY, epoch=1, recipe=RECIPE)
    assert key != wheel_cache_key(cell, "src", IDENTITY, epoch=2, recipe=RECIPE)
    other = {**IDENTITY, "device_compiler": "nvcc 13.0.89"}
    assert key != wheel_cache_key(cell, "src", other, epoch=1, recipe=RECIPE)
    assert key != wheel_cache_key(CELLS["13.0-aarch64"], "src", IDENTITY, epoch=1, recipe=RECIPE)
    rebuilt = dataclasses.replace(cell, build=dataclasses.replace(cell.build, env=(("A", "1"),)))
    assert key != wheel_cache_key(rebuilt, "src", IDENTITY, epoch=1, recipe=RECIPE)
    modes = {
        wheel_cache_key(
            dataclasses.replace(cell, compress_mode=mode), "src", IDENTITY, epoch=1, recipe=RECIPE
        )
        for mode in (None, "size", "none")
    }
    assert len(modes) == 3  # a changed compress-mode is never served the other mode's wheel


def test_a_file_name_that_is_not_utf8_is_keyed_by_its_bytes(tmp_path: Path) -> None:
    """Issue 49, F4: a project file named b"\\xff.cu" ended every `release build` in a
    UnicodeEncodeError. Its name is hashed as the bytes on disk: another file of other
    bytes keys another tree, and the UTF-8 names hash as they did."""
    trees = []
    for raw in (b"\xff.cu", b"\xfe.cu"):
        tree = tmp_path / f"{raw[0]:x}"
        (tree / "kernels").mkdir(parents=True)
        (tree / "kernels" / "a.cu").write_bytes(b"__global__ void a() {}\n")
        with open(os.fsencode(tree / "kernels") + b"/" + raw, "wb") as handle:
            handle.write(b"x")
        trees.append(source_digest(project_files(tree)))
    assert trees[0] != trees[1]
    names = [name for name, _ in project_files(tmp_path / "ff")]
    assert names == ["kernels/a.cu", "kernels/\udcff.cu"]
    utf8 = [("kernels/a.cu", b"x"), ("kernels/é.cu", b"y")]
    digest = hashlib.sha256()
    for name, data in utf8:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    assert source_digest(utf8) == digest.hexdigest()  # the keys of every tree so far


def test_the_build_gets_the_timestamp_and_no_credentials() -> None:
    base = {"PATH": "/bin", "GITHUB_TOKEN": "ghs_secret", "TWINE_PASSWORD": "pw12", "HOME": "/h"}
    inputs = BuildInputs(env={"RELEASE_SMS": "75"}, config_settings={})
    env = cell_environment(inputs, base=base, python="/venv/bin/python", epoch=1_700_000_000)
    assert env["SOURCE_DATE_EPOCH"] == "1700000000"
    assert "GITHUB_TOKEN" not in env
    assert "TWINE_PASSWORD" not in env
    assert env["HOME"] == "/h"
    assert env["PATH"] == "/venv/bin:/bin"
    assert env["RELEASE_SMS"] == "75"
    stale = cell_environment(inputs, base={"RELEASE_PTX": "90"}, python="/p/python", epoch=1)
    assert "RELEASE_PTX" not in stale, "csrc's inputs come from the cell, never from outside"


def test_source_date_epoch_must_be_seconds() -> None:
    assert parse_epoch("1700000000") == 1_700_000_000
    assert parse_epoch("5") == DEFAULT_EPOCH  # zip files start in 1980
    with pytest.raises(ConfigError, match="not a whole number"):
        parse_epoch("yesterday")


# -- the manifest of dist/ after a build ------------------------------------------------------


def reconciled(
    previous: Manifest | None,
    built: Sequence[WheelEntry],
    attempted: Sequence[str],
    intact: bool = True,
    version: str = "0.1.0",
) -> Reconciled:
    return reconcile(
        previous,
        built,
        project="k3-kernels",
        version=version,
        attempted=attempted,
        cells=CELLS,
        intact=lambda entry: intact,
        epoch=DEFAULT_EPOCH,
    )


def entries() -> dict[str, WheelEntry]:
    return {cell_id: entry_for(cell, cell_wheel(cell)) for cell_id, cell in CELLS.items()}


def test_a_filtered_build_keeps_the_other_cells_of_the_same_version() -> None:
    wheels = entries()
    previous = Manifest(project="k3-kernels", version="0.1.0", wheels=tuple(wheels.values()))
    out = reconciled(previous, [wheels["12.9-x86_64"]], attempted=["12.9-x86_64"])
    assert sorted(w.cell for w in out.manifest.wheels) == sorted(CELLS)
    assert len(out.kept) == 3
    assert out.dropped == ()


def test_a_failed_cell_loses_its_old_entry() -> None:
    wheels = entries()
    previous = Manifest(project="k3-kernels", version="0.1.0", wheels=tuple(wheels.values()))
    out = reconciled(previous, [], attempted=["12.9-x86_64"])
    assert "12.9-x86_64" not in {w.cell for w in out.manifest.wheels}


def test_entries_of_another_version_or_a_removed_cell_are_dropped_and_named() -> None:
    wheels = entries()
    stale = WheelEntry(**{**vars(wheels["13.0-x86_64"]), "cell": "12.8-x86_64"})
    previous = Manifest(project="k3-kernels", version="0.1.0", wheels=(stale,))
    out = reconciled(previous, [], attempted=[])
    assert out.manifest.wheels == ()
    assert out.dropped == (f"{stale.filename}: the matrix no longer has this cell",)
    older = Manifest(project="k3-kernels", version="0.0.9", wheels=(wheels["13.0-x86_64"],))
    out = reconciled(older, [], attempted=[])
    assert out.manifest.wheels == ()
    assert "another version" in out.dropped[0]


def test_an_entry_whose_wheel_changed_is_dropped() -> None:
    wheels = entries()
    previous = Manifest(project="k3-kernels", version="0.1.0", wheels=(wheels["13.0-x86_64"],))
    out = reconciled(previous, [], attempted=[], intact=False)
    assert out.manifest.wheels == ()
    assert "missing or changed" in out.dropped[0]


# -- dist/ against its manifest ---------------------------------------------------------------


def dist_with(tmp_path: Path, cell: Cell, data: bytes) -> Manifest:
    (tmp_path / cell.wheel_filename).write_bytes(data)
    return Manifest(project="k3-kernels", version="0.1.0", wheels=(entry_for(cell, data),))


def test_a_consistent_dist_has_no_problems(tmp_path: Path) -> None:
    manifest = dist_with(tmp_path, CELLS["12.9-x86_64"], cell_wheel(CELLS["12.9-x86_64"]))
    assert dist_problems(manifest, tmp_path, manifest.wheels) == []


def test_a_manifest_of_another_version_than_its_wheels_is_caught(tmp_path: Path) -> None:
    manifest = dist_with(tmp_path, CELLS["13.0-x86_64"], cell_wheel(CELLS["13.0-x86_64"]))
    other = Manifest(project=manifest.project, version="0.2.0", wheels=manifest.wheels)
    problems = dist_problems(other, tmp_path, other.wheels)
    assert any("the manifest releases 0.2.0" in p for p in problems)


def test_metadata_that_disagrees_with_the_filename_is_caught(tmp_path: Path) -> None:
    cell = CELLS["13.0-x86_64"]
    manifest = dist_with(tmp_path, cell, cell_wheel(cell, name="other-project"))
    assert any("METADATA Name" in p for p in dist_problems(manifest, tmp_path, manifest.wheels))
    entry = manifest.wheels[0]
    facts = wheel_facts(cell_wheel(cell, version="0.1.1"))
    assert any("METADATA Version" in p for p in entry_problems(manifest, entry, facts))


def test_a_wheel_renamed_with_its_entry_to_other_tags_is_caught(tmp_path: Path) -> None:
    """The manylinux wheel renamed py3-none-any, its entry's filename edited (same bytes,
    size and sha256): plan and publish --dry-run would upload it as the any wheel."""
    cell = CELLS["13.0-x86_64"]
    data = cell_wheel(cell)
    renamed = cell.wheel_filename.rsplit("-", 1)[0].rsplit("-", 1)[0] + "-none-any.whl"
    (tmp_path / renamed).write_bytes(data)
    entry = dataclasses.replace(entry_for(cell, data), filename=renamed)
    manifest = Manifest(project="k3-kernels", version="0.1.0", wheels=(entry,))
    problems = dist_problems(manifest, tmp_path, manifest.wheels)
    assert problems == [
        f"{renamed}: WHEEL tags ['{cell.wheel_filename.split('-', 2)[2][:-4]}'] differ from the "
        f"filename's ['{renamed.split('-', 2)[2][:-4]}']"
    ]


def test_other_bytes_under_the_filename_are_caught(tmp_path: Path) -> None:
    cell = CELLS["13.0-x86_64"]
    manifest = dist_with(tmp_path, cell, cell_wheel(cell))
    data = cell_wheel(cell, date=(2026, 12, 1))  # same size, other bytes
    assert len(data) == manifest.wheels[0].size
    (tmp_path / cell.wheel_filename).write_bytes(data)
    problems = dist_problems(manifest, tmp_path, manifest.wheels)
    assert any("sha256" in p for p in problems), problems
    (tmp_path / cell.wheel_filename).unlink()
    assert any("is missing" in p for p in dist_problems(manifest, tmp_path, manifest.wheels))


# -- comparing a rebuild ----------------------------------------------------------------------


def test_identical_wheels_compare_identical() -> None:
    cell = CELLS["13.0-x86_64"]
    data = cell_wheel(cell)
    verdict = compare(cell.id, cell.wheel_filename, entry_for(cell, data), data, data)
    assert verdict.identical


def test_the_first_differing_member_is_named_with_how_it_differs() -> None:
    base = [("a.py", b"one"), ("b.so", b"two-bytes"), ("c.txt", b"three")]
    assert first_difference(
        wheel_bytes(base), wheel_bytes([base[0], ("b.so", b"two-BYTES"), base[2]])
    ) == (
        "b.so: same size, other content (sha256 "
        f"{hashlib.sha256(b'two-bytes').hexdigest()[:12]}... vs "
        f"{hashlib.sha256(b'two-BYTES').hexdigest()[:12]}..., first differing byte at offset 4)"
    )
    assert first_difference(wheel_bytes(base), wheel_bytes([base[0], ("b.so", b"2"), base[2]])) == (
        "b.so: 9 bytes, rebuilt 1 bytes"
    )
    dated = first_difference(wheel_bytes(base), wheel_bytes(base, date=(2026, 12, 1)))
    assert dated.startswith("a.py: dated (1980, 1, 1, 0, 0, 0), rebuilt (2026, 12, 1")
    assert (
        first_difference(wheel_bytes(base), wheel_bytes(base[:2]))
        == "c.txt: missing from the rebuild"
    )
    assert first_difference(wheel_bytes(base), wheel_bytes(base[::-1])) == (
        "a.py: at position 0, elsewhere in the rebuild"
    )


def test_a_rebuild_without_the_reference_wheel_still_gets_a_verdict() -> None:
    cell = CELLS["13.0-x86_64"]
    entry = entry_for(cell, cell_wheel(cell))
    verdict = compare(cell.id, cell.wheel_filename, entry, None, b"other")
    assert not verdict.identical
    assert "not beside its manifest" in verdict.detail
    missing = compare(cell.id, cell.wheel_filename, None, None, b"other")
    assert not missing.identical


def test_a_reference_wheel_that_is_not_the_recorded_one_is_not_compared_member_by_member() -> None:
    cell = CELLS["13.0-x86_64"]
    data = cell_wheel(cell)
    entry = entry_for(cell, data)
    member = data.index(b"k3_kernels/__init__.py") + len("k3_kernels/__init__.py")
    damaged = data[:member] + b"\xff" + data[member + 1 :]  # a member that no longer inflates
    verdict = compare(
        cell.id, cell.wheel_filename, entry, damaged, cell_wheel(cell, date=(2026, 1, 1))
    )
    assert not verdict.identical
    assert "the wheel beside the manifest is not the one it records" in verdict.detail


# -- files written for others to read ---------------------------------------------------------


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def test_atomic_writes_get_the_umask_mode(tmp_path: Path, umask_027: None) -> None:
    assert current_umask() == 0o027
    write_atomic(tmp_path / "f", b"x")
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o640


def test_atomic_writes_are_0644_under_the_usual_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "f", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o644


def test_a_filtered_build_keeps_every_copy_of_a_cell_it_did_not_attempt() -> None:
    """A cell published to several places has an entry per copy, one cell id: a build of
    other cells keeps them all, a build of that cell replaces them all."""
    matrix = load_matrix(REPO / "tests" / "data" / "matrix" / "good" / "sgl-layout.yaml")
    cells = {c.id: c for c in matrix.cells}
    copies = [c.as_copy(copy) for c in matrix.cells for copy in c.copies]
    wheels = [entry_for(c, cell_wheel(c)) for c in copies]
    assert [w.cell for w in wheels].count("13.0-x86_64") == 2
    previous = Manifest(project="k3-kernels", version="0.1.0", wheels=tuple(wheels))

    def rebuilt(attempted: list[str]) -> Reconciled:
        built = [w for w in wheels if w.cell in attempted]
        return reconcile(
            previous, built, project="k3-kernels", version="0.1.0", attempted=attempted,
            cells=cells, intact=lambda entry: True, epoch=DEFAULT_EPOCH,
        )  # fmt: skip

    out = rebuilt(["12.9-x86_64"])
    assert out.dropped == ()
    assert sorted(out.kept) == sorted(w.filename for w in wheels if w.cell != "12.9-x86_64")
    assert {w.filename for w in out.manifest.wheels} == {w.filename for w in wheels}
    assert "k3_kernels-0.1.0+cu130-py3-none-manylinux_2_28_x86_64.whl" in out.kept


def test_a_rebuild_published_under_a_build_tag_takes_its_originals_place_in_dist(
    tmp_path: Path,
) -> None:
    """dist/ of two build jobs (a manifest each): the rebuild's file written, only the
    manifest that listed the original rewritten, the original gone; dist/ checks whole."""
    dist = tmp_path / "dist"
    destination = wheels.pypi_destination("http://127.0.0.1:1/")
    x86, arm = (
        wheels.make_wheel(dist, platform=f"manylinux_2_28_{arch}") for arch in ("x86_64", "aarch64")
    )
    for manifest_name, wheel in (("manifest-x86_64.json", x86), ("manifest-aarch64.json", arm)):
        manifest = Manifest(project="k3-kernels", version="0.1.0",
                            wheels=(wheels.entry_for(wheel, destination),))  # fmt: skip
        write_manifest(manifest, dist / manifest_name)
    untouched = (dist / "manifest-x86_64.json").read_bytes()
    name, data = with_build_tag(arm.name, arm.read_bytes(), 1)
    source = tmp_path / name.filename
    source.write_bytes(data)
    rebuild = dataclasses.replace(
        wheels.entry_for(arm, destination), filename=name.filename, size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )  # fmt: skip
    write_rebuilt(dist, {arm.name: (rebuild, source)})
    assert sorted(p.name for p in dist.glob("*.whl")) == sorted([x86.name, name.filename])
    assert (dist / "manifest-x86_64.json").read_bytes() == untouched
    (written,) = read_manifest(dist / "manifest-aarch64.json").wheels
    assert (written.filename, written.size, written.sha256, written.cell) == (
        rebuild.filename, rebuild.size, rebuild.sha256, rebuild.cell,
    )  # fmt: skip
    assert {w.filename for w in load_dist(dist).wheels} == {x86.name, name.filename}


def test_a_projects_linked_directory_keys_its_wheel(tmp_path: Path) -> None:
    """A project's csrc/cutlass linked to a checkout beside it: its headers were not hashed,
    so an edit there was served the wheel built before it (the build reads through the
    link). A link back up the tree is not followed again; build outputs stay out."""
    project, cutlass = tmp_path / "project", tmp_path / "cutlass"
    (project / "csrc").mkdir(parents=True)
    (project / "csrc" / "k.cu").write_text("k\n")
    (cutlass / "include" / "build").mkdir(parents=True)
    (cutlass / "include" / "gemm.h").write_text("v1\n")
    (cutlass / "include" / "build" / "out.o").write_text("o\n")
    (project / "csrc" / "cutlass").symlink_to(cutlass)
    (project / "csrc" / "up").symlink_to(project)
    assert [name for name, _ in project_files(project)] == [
        "csrc/cutlass/include/gemm.h",
        "csrc/k.cu",
    ]
    before = source_digest(project_files(project))
    (cutlass / "include" / "gemm.h").write_text("v2\n")
    assert source_digest(project_files(project)) != before


def test_a_tree_deeper_than_pythons_recursion_limit_is_keyed(tmp_path: Path) -> None:
    """rglob walked a project 1,100 directories deep into a RecursionError (a traceback at
    every build); the walk keeps no stack of calls."""
    deep = tmp_path / "project"
    deep.mkdir()
    here = os.getcwd()
    os.chdir(deep)
    try:
        for _ in range(1100):
            os.mkdir("d")
            os.chdir("d")
        Path("k.cu").write_text("k\n")
    finally:
        os.chdir(here)
    try:
        ((name, path),) = project_files(deep)
        assert (name.count("/"), path.read_bytes()) == (1100, b"k\n")
    finally:  # shutil.rmtree, which removes tmp_path, recurses as deep as the tree
        os.chdir(deep)
        for _ in range(1100):
            os.chdir("d")
        os.remove("k.cu")
        for _ in range(1100):
            os.chdir("..")
            os.rmdir("d")
        os.chdir(here)


def test_the_source_walk_is_bounded_by_the_tree_not_by_what_its_links_make_of_it(
    tmp_path: Path,
) -> None:
    """Found by hostile trees: .git was hashed (two clones of one commit keyed two
    wheels); 24 directories linked twice each to the next were walked by 2**24 paths; a
    link to /proc/kmsg was read forever; a sparse file of 100 GiB ended the build in a
    MemoryError, and a tree of large files was held in memory whole."""
    project = tmp_path / "project"
    (project / "csrc").mkdir(parents=True)
    (project / "csrc" / "k.cu").write_text("k\n")
    before = source_digest(project_files(project))
    (project / ".git" / "objects").mkdir(parents=True)
    (project / ".git" / "objects" / "pack").write_text("this clone's own\n")
    assert source_digest(project_files(project)) == before
    chain = [tmp_path / f"d{n}" for n in range(24)]
    for here, after in itertools.pairwise(chain):
        here.mkdir()
        (here / "x").symlink_to(after, target_is_directory=True)
        (here / "y").symlink_to(after, target_is_directory=True)
    chain[-1].mkdir()
    (chain[-1] / "leaf.h").write_text("leaf\n")
    (project / "third_party").symlink_to(chain[0])
    assert [name for name, _ in project_files(project)] == [
        "csrc/k.cu", "third_party/" + "x/" * 23 + "leaf.h"
    ]  # fmt: skip
    (project / "third_party").unlink()
    (project / "status").symlink_to("/proc/self/status")  # a size of 0, and an end
    (project / "empty").write_text("")
    same = [("status", Path("/proc/self/status"))]
    assert source_digest(same) == source_digest([("status", project / "empty")])
    with (project / "big.bin").open("wb") as handle:
        handle.truncate(MAX_SOURCE_FILE + 1)  # sparse: no block of it is written
    with pytest.raises(FileError) as refused:
        source_digest(project_files(project))
    assert refused.value.message.startswith(f"{project / 'big.bin'}: a file of ")
