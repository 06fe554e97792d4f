"""One writer for a wheel changed after its build: `rewritten_wheel` copies its members in
their order with their dates, modes and compression, some renamed or with new content, and
`rewritten_record` puts the new rows into RECORD; relabelling (release.building.relabel), the
torch pin (release.building.torchpin) and a new build tag (`with_build_tag`: a rebuilt wheel
published beside the bytes a destination already holds under its name) all go through them,
so the same input gives the same bytes. What a wheel says about itself is
release.wheelfile's."""

from __future__ import annotations

import csv
import io
import re
import zipfile

from release.wheelfile import NotAWheel, WheelName, record_hash


def rewritten_record(record: bytes, renames: dict[str, str], metadata: tuple[str, bytes]) -> bytes:
    """RECORD with renamed paths (`renames`: old top-level folder -> new) and METADATA's
    new hash and size (`metadata`: its new path and bytes). Rows that do not change keep
    their text; changed rows are written as the csv module writes them."""
    out: list[str] = []
    for line in record.decode("utf-8").splitlines(keepends=True):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        rows = list(csv.reader([body])) if body else []
        if not rows or len(rows[0]) != 3:
            out.append(line)
            continue
        path, digest, size = rows[0]
        new_path = _renamed(path, renames)
        if new_path == metadata[0]:
            digest, size = record_hash(metadata[1]), str(len(metadata[1]))
        if (new_path, digest, size) == (path, rows[0][1], rows[0][2]):
            out.append(line)
            continue
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="").writerow([new_path, digest, size])
        out.append(buffer.getvalue() + ending)
    return "".join(out).encode("utf-8")


def _renamed(name: str, renames: dict[str, str]) -> str:
    top, slash, rest = name.partition("/")
    return renames.get(top, top) + slash + rest if slash else renames.get(name, name)


def rewritten_wheel(
    archive: zipfile.ZipFile, renames: dict[str, str], contents: dict[str, bytes]
) -> bytes:
    """`archive`'s members in their order, renamed by `renames`, with the new `contents`
    of those it names (by their new names) and the old content of the others."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        for info in archive.infolist():
            new_name = _renamed(info.filename, renames)
            content = contents.get(new_name)
            out.writestr(
                _copy_info(info, new_name), archive.read(info) if content is None else content
            )
    return buffer.getvalue()


def _copy_info(info: zipfile.ZipInfo, name: str) -> zipfile.ZipInfo:
    """A ZipInfo for `name` with everything of `info` a reader can see kept: date, modes,
    compression, the system that made it, the comment and extra fields."""
    copy = zipfile.ZipInfo(name, date_time=info.date_time)
    copy.compress_type = info.compress_type
    copy.external_attr = info.external_attr
    copy.internal_attr = info.internal_attr
    copy.create_system = info.create_system
    copy.comment = info.comment
    copy.extra = info.extra
    return copy


_BUILD_LINE = re.compile(rb"^Build:[ \t]*(?P<value>[^\r\n]*)", re.MULTILINE)


def with_build_tag(filename: str, data: bytes, number: int) -> tuple[WheelName, bytes]:
    """The wheel `filename` (bytes `data`) as build `number` of its name: the filename's
    build tag (PEP 427: `k3_kernels-0.1.0-1-py3-none-...whl`) and the WHEEL file's `Build:`
    line set, RECORD's row of WHEEL updated, every other member as it was. Deterministic:
    the same wheel and number give the same bytes. NotAWheel where it is not a wheel that
    can be rewritten (not a zip, not one .dist-info, no WHEEL or RECORD, a signed RECORD)."""
    if number < 1:
        raise ValueError(f"a build number starts at 1, not {number}")
    name = WheelName.parse(filename).with_build((number, ""))
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, EOFError, ValueError):
        raise NotAWheel("not a zip archive") from None
    with archive:
        present = set(archive.namelist())
        dist_infos = sorted(
            {top for n in present if (top := n.split("/", 1)[0]).endswith(".dist-info")}
        )
        if len(dist_infos) != 1:
            raise NotAWheel(f"has {len(dist_infos)} .dist-info directories, not 1")
        dist_info = dist_infos[0]
        if {f"{dist_info}/RECORD.jws", f"{dist_info}/RECORD.p7s"} & present:
            raise NotAWheel("its RECORD is signed: a new build tag would void the signature")
        wheel_path, record_path = f"{dist_info}/WHEEL", f"{dist_info}/RECORD"
        if wheel_path not in present or record_path not in present:
            missing = wheel_path if wheel_path not in present else record_path
            raise NotAWheel(f"has no {missing}")
        wheel = _wheel_file_with_build(archive.read(wheel_path), str(number))
        record = rewritten_record(archive.read(record_path), {}, (wheel_path, wheel))
        return name, rewritten_wheel(archive, {}, {wheel_path: wheel, record_path: record})


def _wheel_file_with_build(wheel: bytes, build: str) -> bytes:
    """The WHEEL file with `Build: <build>`: its Build line's value replaced where it has
    one, else the line added after its last header, in the file's own line ending."""
    end = wheel.find(b"\n\n")
    head, rest = (wheel, b"") if end < 0 else (wheel[: end + 1], wheel[end + 1 :])
    found = _BUILD_LINE.search(head)
    if found is not None:
        start, stop = found.span("value")
        return wheel[:start] + build.encode() + wheel[stop:]
    ending = b"\r\n" if b"\r\n" in head else b"\n"
    if head and not head.endswith(b"\n"):
        head += ending
    return head + b"Build: " + build.encode() + ending + rest
