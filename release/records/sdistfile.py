"""What the release's sdist must be, checked alike wherever it is read: after `release build
--sdist` builds it, when plan, publish and verify read it from dist/ (`records.dist.load_dist`),
and when verify downloads it. A gzip'd tar whose members are all files or directories under
one base directory, `{name}-{version}/` (PEP 625): none absolute, none through `..`, no link,
none twice, none whose name holds what no editor shows (a line break, an escape, a format
character, a byte that is not UTF-8); and whose `{base}/PKG-INFO` names the release's project
and version. Pure: bytes in, problems out.

`project_of` reads the project a distribution's file name (an sdist's, or a wheel's) names,
for the publishers that sort what a destination holds by project.
"""

from __future__ import annotations

import io
import tarfile
import zlib
from collections import Counter
from email.parser import HeaderParser
from pathlib import PurePosixPath

from packaging.utils import NormalizedName, canonicalize_name, parse_sdist_filename

from release.wheelfile import WheelName

SDIST_SUFFIX = ".tar.gz"
SHOWN_PROBLEMS = 3
MAX_PKG_INFO_BYTES = 2**20  # core metadata with a long description is some 100 KB


def member_problem(name: str, base: str) -> str | None:
    """Why the member `name` lies outside `base/`, or is named unprintably, if it does."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] != base:
        return f"{name[:120]!r} is outside {base}/"
    if not name.isprintable():  # a tar's name that is not UTF-8 reads as lone surrogates
        return (
            f"{name[:120]!r}: its name holds a control or format character or a byte that is "
            "not UTF-8, which a listing shows as something else or not at all"
        )
    return None


def sdist_archive_problems(data: bytes, filename: str, project: str, version: str) -> list[str]:
    """Why the sdist `data`, named `filename`, is not `project` `version`'s (at most
    SHOWN_PROBLEMS, each naming the file); none where it is."""
    base = filename.removesuffix(SDIST_SUFFIX)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = tar.getmembers()
            info = next((m for m in members if m.name == f"{base}/PKG-INFO"), None)
            handle = tar.extractfile(info) if info is not None and info.isfile() else None
            pkg_info = handle.read(MAX_PKG_INFO_BYTES) if handle is not None else None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        return [f"{filename}: not a gzip'd tar archive ({error})"]
    problems = [
        f"{filename}: member {m.name[:120]!r} is a link or a device, not a file or a directory"
        for m in members
        if not (m.isfile() or m.isdir())
    ]
    problems += [f"{filename}: member {p}" for m in members if (p := member_problem(m.name, base))]
    counted = Counter(m.name for m in members)
    problems += [
        f"{filename}: member {n[:120]!r} is there {k} times" for n, k in counted.items() if k > 1
    ]
    if pkg_info is None:
        problems.append(f"{filename}: no {base}/PKG-INFO (PEP 625: one top directory {base}/)")
    else:
        problems += _pkg_info_problems(pkg_info, filename, project, version)
    return problems[:SHOWN_PROBLEMS]


def _pkg_info_problems(data: bytes, filename: str, project: str, version: str) -> list[str]:
    headers = HeaderParser().parsestr(data.decode("utf-8", "replace"))
    name, got = headers.get("Name"), headers.get("Version")
    problems = []
    if headers.get("Metadata-Version") is None:  # required, as Name and Version are
        problems.append(f"{filename}: PKG-INFO has no Metadata-Version")
    if name is None or canonicalize_name(name) != canonicalize_name(project):
        problems.append(f"{filename}: PKG-INFO Name is {name!r:.60}, the release's is {project}")
    if got != version:
        problems.append(f"{filename}: PKG-INFO Version is {got!r:.60}, the release is {version}")
    return problems


def project_of(filename: str) -> NormalizedName:
    """The project a wheel's or an sdist's (PEP 625) file name names; ValueError (NotAWheel,
    packaging's InvalidSdistFilename) for a name that is neither."""
    if filename.endswith(SDIST_SUFFIX):
        return parse_sdist_filename(filename)[0]
    return WheelName.parse(filename).project
