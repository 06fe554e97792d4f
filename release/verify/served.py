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
from pathlib import Path

from release.defaults import WHEEL_SIZE_LIMIT
from release.destinations.reach import Reach
from release.inspection.findings import Finding
from release.inspection.indexrules import duplicates, hash_mismatch, stray_links
from release.inspection.served import inspect_served
from release.inspection.torchcuda import TorchIndexes
from release.matrix import Cell, Matrix
from release.records.published import Published, PublishedFile
from release.remote import httpclient as http
from release.remote.httpclient import Download
from release.remote.retry import Deadline, RetryPolicy
from release.remote.simple_index import ACCEPT, ListedFile, project_files, project_page_url
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


def _wheel_checks(
    file: PublishedFile, cell: Cell | None, get: _Getter, scratch: Path, torch: TorchIndexes
) -> tuple[list[Check], str | None, str | None]:
    """The inspection of one wheel as served, the sha256 of what was served and that of
    its METADATA (None where it has none to read)."""
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
            return [check], None, None
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
    return checks, got.sha256, served.metadata_sha256


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


def _page_checks(
    page: str,
    published: Published,
    served: Mapping[str, str],
    metadata: Mapping[str, str],
    get: _Getter,
) -> list[Check]:
    """One index page read whole."""
    got = get(page, keep=True, accept=ACCEPT)
    if not got.ok or got.body is None:
        return []  # the listing and index checks name a page that does not load
    try:
        files = project_files(got.body, got.content_type, page)
    except ValueError:
        return []  # likewise an unreadable one
    found = duplicates(page, files)
    twice = {f.file for f in found}
    for listed in files:
        if listed.name in twice and listed.name in served:
            wrong = hash_mismatch(page, listed, {"sha256": served[listed.name]})
            found += [wrong] if wrong is not None else []
    names = [f.filename for f in published.files] + [c.filename for c in published.companions]
    found += stray_links(page, files, published.version, names)
    links = _link_checks(page, files, published, metadata, get)
    if found or links:
        return [_failed(one) for one in found] + links
    detail = "read whole: no filename listed twice, no link to a wheel the release lacks"
    return [Check(subject=page, check="index-page", ok=True, detail=detail, url=page)]


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
        served = {
            f.filename: sha for f, (_, sha, _) in zip(published.files, reads, strict=True) if sha
        }
        metadata = {
            f.filename: sha
            for f, (_, served_sha, sha) in zip(published.files, reads, strict=True)
            if sha and served_sha == f.sha256  # the METADATA of the built bytes alone
        }
        for wheel_checks, _, _ in reads:
            checks += wheel_checks
        for page in pages:
            checks += _page_checks(page, published, served, metadata, get)
    return checks + missing_variants(published, matrix)
