"""`release verify`'s second look: every wheel of the release inspected again from the bytes
served, with the inspection `release audit` applies to anyone's wheels
(release.inspection.served), and every index page of the release read whole
(release.inspection.indexrules).

- each wheel: downloaded into a scratch file (one per worker at a time, deleted after its
  inspection) and held to the `archive`, `filename`, `manylinux`, `cuda-major` and `torch`
  rules, the CUDA major its cell was built for (from the matrix, where verify has one)
  standing in for its label; a finding is a failed check named by its rule, with the file
  and its URL. Device code is not listed again: that needs cuobjdump, which verify does not
  provision (the build listed it, and the sha256 ties the bytes to that);
- each index page the release's files are listed on: a filename listed twice (every
  listing's hash against the bytes served: the listing and index checks read one), a link
  to a wheel of the release's version that the release does not have; each link to one of
  the release's wheels downloaded where it is not the URL already checked (a page, PyPI's
  included, may link other bytes under the built hash: pip takes its link), and its PEP 658
  `.metadata` held to the METADATA of the wheel as served (pip resolves from it alone);
- the matrix's variants: each (local label, arch) of its cells has a wheel in the release.

`served_checks` is the one call release.verify.run makes.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import unquote

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from release.defaults import WHEEL_SIZE_LIMIT
from release.destinations.reach import Reach
from release.errors import one_line, shown
from release.inspection.findings import Finding
from release.inspection.indexrules import duplicates, listing_findings, stray_links
from release.inspection.served import inspect_served
from release.inspection.torchcuda import TorchIndexes
from release.matrix import Cell, Matrix
from release.records.published import Published, PublishedFile
from release.remote import httpclient as http
from release.remote.httpclient import Download
from release.remote.retry import Deadline, RetryPolicy
from release.remote.simple_index import (
    ACCEPT,
    ListedFile,
    form_of,
    project_files,
    project_page_url,
)
from release.verify.checks import Check, VerifySettings, origin_auth
from release.workers import Workers


def _failed(found: Finding) -> Check:
    return Check(subject=found.file, check=found.rule, ok=False, detail=found.detail, url=found.url)


def _copies(matrix: Matrix) -> list[Cell]:
    """Each cell as each of its copies publishes it (a cell sent to several places)."""
    return [c.as_copy(copy) for c in matrix.cells for copy in c.copies]


def _cell_of(matrix: Matrix | None, file: PublishedFile) -> Cell | None:
    if matrix is None:
        return None
    return next(
        (c for c in _copies(matrix) if c.local_label == file.local_label and c.arch == file.arch),
        None,
    )


class _Getter:
    """verify's GETs for this look: its credentials by origin, its retries and deadline."""

    def __init__(self, client: http.Client, settings: VerifySettings, secrets: tuple[str, ...]):
        self.client, self.secrets = client, secrets
        self.policy = RetryPolicy(
            attempts=settings.attempts, initial_delay=settings.backoff_s, total=settings.deadline_s
        )
        self.deadline = Deadline(settings.deadline_s, time.monotonic)

    def __call__(
        self,
        url: str,
        *,
        keep: bool = False,
        accept: str | None = None,
        into: Path | None = None,
        byte_range: tuple[int, int] | None = None,
        max_bytes: int | None = None,
    ) -> Download:
        return http.fetch(
            self.client, url, keep=keep, accept=accept, into=into, policy=self.policy,
            deadline=self.deadline, secrets=self.secrets, byte_range=byte_range,
            max_bytes=max_bytes, identity=into is not None,  # a file, as stored: as pip asks
        )  # fmt: skip


@dataclass(frozen=True)
class _Served:
    """What one wheel's second download found: its checks, and the sha256 and size of the
    bytes served and the sha256 of their METADATA (None where it was not read)."""

    checks: list[Check]
    sha256: str | None = None
    size: int | None = None
    metadata_sha256: str | None = None


def _wheel_checks(
    file: PublishedFile, cell: Cell | None, get: _Getter, scratch: Path, torch: TorchIndexes
) -> _Served:
    """The inspection of one wheel as served (see `_Served`)."""
    path = scratch / f"{threading.get_ident()}.whl"  # a worker reads one wheel at a time
    torch_index = cell.torch_index if cell is not None else None  # None: PyPI's
    try:
        # no more than the built size (a gzip bomb, a body that never ends fills no disk)
        most = file.size if file.size >= 0 else WHEEL_SIZE_LIMIT
        got = get(file.url, into=path, max_bytes=most)
        if not got.ok:
            why = got.error or f"HTTP {got.status}"
            detail = f"not inspected again: it does not download ({why})"
            check = Check(subject=file.filename, check="inspection", ok=False, detail=detail)
            return _Served([check])
        served = inspect_served(
            file.filename, path, url=file.url,
            cell_major=cell.cuda.major if cell is not None else None,
            torch_cuda=torch.of(torch_index).cuda_of,
        )  # fmt: skip
    finally:
        path.unlink(missing_ok=True)
    checks = [_failed(found) for found in served.findings]
    checks += [
        Check(
            subject=file.filename, check=rule, ok=True, detail=f"not checked: {why}", url=file.url
        )
        for rule, why in served.unchecked
    ]
    if not served.findings:
        rules = ", ".join(sorted(served.checked))
        detail = f"inspected again from the bytes served: no finding ({rules})"
        checks.append(
            Check(subject=file.filename, check="inspection", ok=True, detail=detail, url=file.url)
        )
    return _Served(checks, got.sha256, got.size, served.metadata_sha256)


def _link_checks(
    page: str, files: Sequence[ListedFile], published: Published, metadata: Mapping[str, str],
    get: _Getter,
) -> list[Check]:  # fmt: skip
    """The failures of the page's links to the release's wheels: other bytes at a link that
    is not the URL the download check read, a `.metadata` that is not the served wheel's."""
    ours = {f.filename: f for f in published.files}
    failed = []
    for listed in files:
        file = ours.get(listed.name)
        if file is None:
            continue
        subject = f"{page} -> {listed.name}"
        if listed.url != file.url:
            got = get(listed.url)
            if not got.ok or got.sha256 != file.sha256:
                detail = f"the page links other bytes: {_why(got)}, built {file.sha256}"
                failed.append(
                    Check(subject=subject, check="index", ok=False, detail=detail, url=listed.url)
                )
        expected = metadata.get(listed.name)
        if listed.metadata_sha256 is not None and expected is not None:
            got = get(listed.url + ".metadata")
            if not got.ok or got.sha256 != expected:
                detail = f"not the served wheel's METADATA: {_why(got)}, the wheel's {expected}"
                url = listed.url + ".metadata"
                failed.append(
                    Check(subject=subject, check="metadata", ok=False, detail=detail, url=url)
                )
    return failed


def _why(got: Download) -> str:
    if got.ok:
        return f"sha256 {got.sha256}"
    return got.error or f"HTTP {got.status}"


HTML_ACCEPT = "text/html"  # what a client that asks for no PEP 691 JSON is served
ANY_ACCEPT = "*/*"  # what a client that names no type is served (requests' default)


@dataclass(frozen=True)
class _Form:
    """A project page as served for one Accept header: its body and its files."""

    name: str  # "PEP 691 JSON" or "HTML", by its Content-Type
    body: bytes
    files: list[ListedFile]


def _read_form(page: str, accept: str, get: _Getter) -> _Form | None:
    got = get(page, keep=True, accept=accept)
    if not got.ok or got.body is None:
        return None  # the listing and index checks name a page that does not load
    name = form_of(got.content_type) + (f" (Accept: {accept})" if accept == ANY_ACCEPT else "")
    try:
        return _Form(name, got.body, project_files(got.body, got.content_type, page))
    except ValueError:
        return None  # likewise an unreadable one


def _page_checks(
    page: str,
    published: Published,
    served: Mapping[str, _Served],
    metadata: Mapping[str, str],
    get: _Getter,
) -> list[Check]:
    """One index page read whole, in each form it is served in: as asked with PEP 691's
    Accept (what pip and uv ask), as text/html (browsers) and with */* (a client that names
    no type), each body once. Each form is checked whole, and they must agree."""
    first = _read_form(page, ACCEPT, get)
    if first is None:
        return []
    forms = [first]
    for accept in (HTML_ACCEPT, ANY_ACCEPT):
        other = _read_form(page, accept, get)
        if other is not None and all(other.body != form.body for form in forms):
            forms.append(other)
    failed: list[Check] = []
    for number, form in enumerate(forms):
        failed += _form_checks(
            page, form, published=published, served=served, metadata=metadata, get=get,
            first=number == 0,
        )  # fmt: skip
    for other in forms[1:]:
        failed += _disagreements(page, forms[0], other)
    if failed:
        return failed
    read = " and ".join(f"its {form.name}" for form in forms) if len(forms) > 1 else "whole"
    detail = f"read {read}: no filename listed twice, no link to a wheel the release lacks"
    return [Check(subject=page, check="index-page", ok=True, detail=detail, url=page)]


def _form_checks(
    page: str,
    form: _Form,
    *,
    published: Published,
    served: Mapping[str, _Served],
    metadata: Mapping[str, str],
    get: _Getter,
    first: bool,
) -> list[Check]:
    """One form of a page checked whole. Every listing of the release's wheels is held to
    the bytes served (a PEP 691 size too); in the first form, whose single listings the
    listing and index checks compare, only a name listed twice has its hash compared here."""
    files = form.files
    found = duplicates(page, files)
    twice = {f.file for f in found}
    for listed in files:
        wheel = served.get(listed.name)
        if wheel is None or wheel.sha256 is None or wheel.size is None:
            continue
        digests = {"sha256": wheel.sha256} if listed.name in twice or not first else {}
        found += listing_findings(page, listed, digests=digests, size=wheel.size)
    names = [f.filename for f in published.files] + [c.filename for c in published.companions]
    found += stray_links(page, files, published.version, names)
    if not first:
        found = [replace(f, detail=f"{f.detail} (its {form.name} form)") for f in found]
    return [_failed(one) for one in found] + _link_checks(page, files, published, metadata, get)


_FACTS = ("URL", "sha256", "PEP 658 metadata", "Requires-Python", "yank")
_WHOLE = 300  # characters a fact is quoted in


def _said(files: Sequence[ListedFile]) -> dict[str, set[tuple[object, ...]]]:
    """What a form says of each filename (_FACTS), each as a client reads it: the URL
    percent-decoded (`%2B` is `+`), Requires-Python as a specifier set (`>= 3.9` is
    `>=3.9`)."""
    said: dict[str, set[tuple[object, ...]]] = {}
    for f in files:
        facts = (unquote(f.url), f.sha256, f.metadata_sha256, _specifier(f.requires_python),
                 f.yanked)  # fmt: skip
        said.setdefault(f.name, set()).add(facts)
    return said


def _specifier(text: str | None) -> object:
    if text is None:
        return None
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return text.strip()


def _disagreements(page: str, one: _Form, other: _Form) -> list[Check]:
    """Where two forms of one page say other things: a client is given one or the other by
    its Accept header (pip and uv the JSON, the rest the HTML), so both must list the same
    files with the same URLs, hashes and attributes."""
    a, b = _said(one.files), _said(other.files)
    failed = []
    for name in sorted(set(a) | set(b)):
        if a.get(name) == b.get(name):
            continue
        if name not in b or name not in a:
            has, lacks = (one, other) if name in a else (other, one)
            detail = f"the {has.name} form lists it, the {lacks.name} form does not"
        else:
            detail = (
                f"the {one.name} and {other.name} forms list it differently: "
                f"{_differing(a[name], b[name])}"
            )
        failed.append(
            Check(
                subject=one_line(f"{page} -> {name}"),
                check="index-page",
                ok=False,
                detail=one_line(f"{detail}; which form a client gets depends on its Accept header"),
                url=page,
            )
        )
    return failed


def _differing(one: set[tuple[object, ...]], other: set[tuple[object, ...]]) -> str:
    """What differs between two forms' facts of a name: each fact that differs, with both
    values (a name listed once in each), or how often each lists it."""
    if len(one) != 1 or len(other) != 1:
        return f"{len(one)} listing(s) against {len(other)}"
    (a,), (b,) = one, other
    return "; ".join(
        # quoted whole: a sha256 cut to 40 characters hides where it differs
        f"{fact} {shown(str(x), _WHOLE)} against {shown(str(y), _WHOLE)}"
        for fact, x, y in zip(_FACTS, a, b, strict=True)
        if x != y
    )


def missing_variants(published: Published, matrix: Matrix | None) -> list[Check]:
    """A (local label, arch) the matrix's cells name that the release has no wheel of, at
    each destination the release published to (one it sent nothing, `publish --only`
    another, holds it to nothing; a partial upload to one it did is found)."""
    if matrix is None:
        return []
    have = {(f.local_label, f.arch) for f in published.files}
    sent_to = {f.destination for f in published.files}
    wanted = sorted(
        {(c.local_label, c.arch) for c in _copies(matrix) if c.destination.name in sent_to},
        key=lambda p: (p[0] or "", p[1]),
    )
    checks = []
    for label, arch in wanted:
        if (label, arch) in have:
            continue
        variant = f"+{label}" if label else "the default variant"
        checks.append(
            Check(
                subject=f"{published.project} {published.version} {variant} {arch}",
                check="missing-variant",
                ok=False,
                detail=f"{matrix.path.name} names {variant} for {arch}; the release has no such "
                "wheel, so no index lists one",
            )
        )
    return checks


def served_checks(
    published: Published,
    matrix: Matrix | None,
    reach: Reach,
    settings: VerifySettings,
) -> list[Check]:
    """Every check of the module doc, for one release, with the credentials `reach` gives
    each destination kind's files."""
    auth = origin_auth(published, reach)
    secrets = (*reach.secrets, *auth.secrets)
    pages = sorted(
        {project_page_url(f.index_url, published.project) for f in published.files if f.index_url}
    )
    checks: list[Check] = []
    with (
        reach.http(auth, concurrency=settings.concurrency) as client,
        Workers(settings.concurrency) as pool,
        # a read a stopped command leaves running (release.workers) may still write there
        tempfile.TemporaryDirectory(
            prefix="release-verify-served-", ignore_cleanup_errors=True
        ) as scratch,
    ):
        get = _Getter(client, settings, secrets)
        torch = TorchIndexes(get)
        reads = list(
            pool.map(
                lambda f: _wheel_checks(f, _cell_of(matrix, f), get, Path(scratch), torch),
                published.files,
            )
        )
        served = {f.filename: read for f, read in zip(published.files, reads, strict=True)}
        metadata = {
            f.filename: read.metadata_sha256
            for f, read in zip(published.files, reads, strict=True)
            # the METADATA of the built bytes alone
            if read.metadata_sha256 and read.sha256 == f.sha256
        }
        for read in reads:
            checks += read.checks
        for page in pages:
            checks += _page_checks(page, published, served, metadata, get)
    return checks + missing_variants(published, matrix)
