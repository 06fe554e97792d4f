"""`release verify` of the nightly channel: a commit's index before /nightly/ moves to it (the
gate of `release publish --channel nightly`), and /nightly/ as it is (`release verify
--channel nightly`, the daily watch).

Over release.verify.checks' download, index and metadata checks (every file and its
`.metadata` with the built size and sha256, every link resolving to its `#sha256=`), a
nightly's pages must list exactly the commit's wheels of their variant: a page that misses
one (a partial matrix) or lists another commit's fails, in its PEP 503 and its PEP 691
form. For /nightly/ the state object names the commit and its files (read as any reader
reads it, over HTTP), and each /nightly/ page must carry the generation of the promotion
that wrote it: a page left behind by an interrupted promotion fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from release.destinations.reach import Reach
from release.errors import PublishError, one_line
from release.matrix import Matrix, Nightly, S3Destination, require_nightly
from release.nightly.layout import (
    GENERATION,
    JSON_PAGE,
    METADATA_SUFFIX,
    NIGHTLY_DIR,
    SHA256,
    STATE_KEY,
    commit_dir,
    commit_keys,
    index_url_of,
    label_dir,
    label_of,
    page_dir,
    url_of,
)
from release.nightly.state import (
    Kept,
    NightlyState,
    Pointer,
    Pruning,
    Uploading,
    from_bytes,
)
from release.records.published import Published, PublishedCompanion, PublishedFile
from release.remote import httpclient as http_edge
from release.remote.httpclient import Client
from release.remote.retry import RetryPolicy
from release.remote.s3 import Bucket
from release.remote.simple_index import (
    ACCEPT,
    SIMPLE_JSON,
    parse_project_page,
    project_page_url,
)
from release.verify.checks import (
    Check,
    Once,
    VerifyReport,
    VerifySettings,
    getter,
    link_check,
    metadata_check,
    verify,
)
from release.wheelfile import WheelName

ONCE = RetryPolicy(attempts=2, initial_delay=1.0, total=60.0)


def exact_checks(published: Published, get: Once) -> list[Check]:
    """Each variant's project page, HTML and JSON, lists exactly the published wheels of
    its index with their sha256; the JSON page's links resolve like the HTML page's."""
    checks: list[Check] = []
    by_index: dict[str, list[PublishedFile]] = {}
    for file in published.files:
        if file.index_url:
            by_index.setdefault(file.index_url, []).append(file)
    for index_url, files in sorted(by_index.items()):
        page = project_page_url(index_url, published.project)
        expected = {f.filename: f.sha256 for f in files}
        for url, accept in ((page, ACCEPT), (page + JSON_PAGE, SIMPLE_JSON)):
            got = get(url, keep=True, accept=accept)
            if not got.ok or got.body is None:
                detail = f"does not resolve: {got.error or f'HTTP {got.status}'}"
                checks.append(Check(subject=url, check="index", ok=False, detail=detail, url=url))
                continue
            try:
                listed = parse_project_page(got.body, got.content_type, url)
            except ValueError as error:
                detail = f"unreadable: {error}"
                checks.append(Check(subject=url, check="index", ok=False, detail=detail, url=url))
                continue
            found = {name: item.sha256 for name, item in listed.items()}
            checks.append(_exact(url, found, expected, published.version))
            if url.endswith(JSON_PAGE):
                for name, item in sorted(listed.items()):
                    checks.append(link_check(name, item, get(item.url), url))
                    if item.metadata_sha256:
                        metadata = get(item.url + METADATA_SUFFIX)
                        checks.append(metadata_check(name, item, metadata, url))
    return checks


def _exact(
    url: str, found: Mapping[str, str | None], expected: Mapping[str, str], version: str
) -> Check:
    missing = sorted(set(expected) - set(found))
    other = sorted(set(found) - set(expected))
    wrong = sorted(n for n in expected if n in found and found[n] != expected[n])
    if not (missing or other or wrong):
        detail = f"lists exactly the {len(expected)} wheel(s) of {version}"
        return Check(subject=url, check="index", ok=True, detail=detail, url=url)
    parts = [f"misses {', '.join(missing)}"] if missing else []
    parts += [f"lists {', '.join(other)}, not of {version}"] if other else []
    parts += [f"lists {', '.join(wrong)} with another sha256"] if wrong else []
    return Check(subject=url, check="index", ok=False, detail="; ".join(parts), url=url)


def verify_commit(
    published: Published,
    reach: Reach,
    settings: VerifySettings,
    *,
    http: Client | None = None,
    also: Sequence[Published] = (),
) -> VerifyReport:
    """Every check of a nightly's `published` files and index (provenance aside: a nightly
    is not attested), and the exact listing of its pages and of those of `also` (the same
    files under another index)."""
    settings = replace(settings, provenance=False)
    own = http is None
    client = http or reach.http(concurrency=settings.concurrency)
    try:
        get = getter(client, settings, reach.secrets)
        report = verify(published, reach, settings, get=get)
        extra = exact_checks(published, get)
        for other in also:
            extra += exact_checks(other, get)
    finally:
        if own:
            client.close()
    return replace(report, checks=report.checks + tuple(extra))


def _arch(filename: str) -> str:
    platform = sorted(t.platform for t in WheelName.parse(filename).tags)[0]
    return platform.split("_", 3)[-1] if platform.startswith("manylinux_") else platform


def pointer_published(
    pointer: Pointer, destination: S3Destination, project: str, directory: str
) -> Published:
    """The files /nightly/ serves, each with the index of its variant under `directory`
    (`nightly/` or the commit's own)."""
    index = destination.index_url
    files = tuple(
        PublishedFile(
            filename=f.filename,
            sha256=f.sha256,
            size=f.size,
            kind="s3",
            destination=destination.name,
            arch=_arch(f.filename),
            local_label=label_of(f.filename) or None,
            url=url_of(index, f"{pointer.commit}/{f.filename}"),
            index_url=index_url_of(index, directory, label_of(f.filename)),
        )
        for f in pointer.files
    )
    companions = tuple(
        PublishedCompanion(
            filename=f.filename + METADATA_SUFFIX,
            sha256=f.metadata_sha256,
            size=-1,
            url=url_of(index, f"{pointer.commit}/{f.filename}{METADATA_SUFFIX}"),
            of=f.filename,
            purpose="PEP 658 metadata",
        )
        for f in pointer.files
    )
    return Published(project=project, version=pointer.version, files=files, companions=companions)


def _failed(project: str, detail: str, url: str) -> VerifyReport:
    check = Check(subject=STATE_KEY, check="pointer", ok=False, detail=detail, url=url)
    return VerifyReport(project=project, version="nightly", checks=(check,))


def verify_channel(
    matrix: Matrix,
    reach: Reach,
    settings: VerifySettings,
    *,
    http: Client | None = None,
) -> VerifyReport:
    """/nightly/ as its readers see it: the state names a commit, its pages list exactly
    that commit's wheels at the generation that promoted it, everything resolves."""
    destination = require_nightly(matrix).destination
    state_url = destination.index_url + STATE_KEY
    own = http is None
    client = http or reach.http(concurrency=settings.concurrency)
    try:
        got = getter(client, settings, reach.secrets)(state_url, keep=True)
        if not got.ok or got.body is None:
            why = "nothing published yet" if got.status == 404 else got.error or f"{got.status}"
            return _failed(matrix.project.name, f"the channel's state: {why}", state_url)
        try:
            state = from_bytes(got.body, state_url, project=matrix.project.name)
        except PublishError as error:
            return _failed(matrix.project.name, error.message, state_url)
        if state.nightly is None:
            return _failed(matrix.project.name, "no commit is on /nightly/ yet", state_url)
        pointer = state.nightly
        project = matrix.project.name
        published = pointer_published(pointer, destination, project, NIGHTLY_DIR)
        own_index = pointer_published(pointer, destination, project, f"{pointer.commit}/")
        report = verify_commit(published, reach, settings, http=client, also=[own_index])
        checks = [*report.checks, *_generation_checks(published, pointer, client, settings)]
        checks += kept_checks(state, destination, project, client)
        checks += unexplained_checks(state, require_nightly(matrix), project, reach)
    finally:
        if own:
            client.close()
    return VerifyReport(project=project, version=pointer.version, checks=tuple(checks))


def _generation_checks(
    published: Published, pointer: Pointer, client: Client, settings: VerifySettings
) -> list[Check]:
    checks = []
    pages = sorted({project_page_url(f.index_url or "", published.project)
                    for f in published.files})  # fmt: skip
    get = getter(client, settings, ())
    for page in pages:
        got = get(page, keep=False, accept=ACCEPT)
        written = got.headers.get(f"x-amz-meta-{GENERATION}", "")
        ok = written == str(pointer.generation)
        detail = (
            f"written by promotion {written} of {pointer.commit[:12]}"
            if ok
            else f"written by promotion {written or '?'}, the state's is {pointer.generation}"
            " (an interrupted promotion: publish the commit again)"
        )
        checks.append(Check(subject=page, check="pointer", ok=ok, detail=detail, url=page))
    return checks


MAX_UNEXPLAINED = 20  # objects named one by one; the rest are counted in one more check


def kept_checks(
    state: NightlyState, destination: S3Destination, project: str, client: Client
) -> list[Check]:
    """Each kept commit other than the one /nightly/ serves (checked whole above): its
    JSON page of each variant lists exactly the wheels its shape names, and each of them
    and its `.metadata` answers a HEAD, with the size and recorded sha256 the page lists
    (no download: a commit is immutable once verified, so what is there is what was)."""
    served = state.nightly.commit if state.nightly is not None else None
    return [_kept_check(state, k, destination, project, client) for k in state.kept
            if k.commit != served]  # fmt: skip


def _kept_check(
    state: NightlyState, kept: Kept, destination: S3Destination, project: str, client: Client
) -> Check:
    shape = state.shapes[kept.shape]
    index = destination.index_url
    problems: list[str] = []
    for label in shape.labels:
        where = page_dir(commit_dir(kept.commit), label, project)
        page = url_of(index, where + JSON_PAGE)
        got = http_edge.fetch(client, page, keep=True, accept=SIMPLE_JSON, policy=ONCE)
        if not got.ok or got.body is None:
            problems.append(f"{page}: {got.error or f'HTTP {got.status}'}")
            continue
        try:
            listed = parse_project_page(got.body, got.content_type, page)
        except ValueError as error:
            problems.append(f"{page}: unreadable ({str(error)[:80]})")
            continue
        wanted = {n for n in shape.wheel_names(kept.time) if label_of(n) == (label or "")}
        if set(listed) != wanted:
            problems.append(f"{page}: lists {len(listed)} wheel(s), not its {len(wanted)}")
        for name, item in sorted(listed.items()):
            problems += _head_problems(client, index, kept.commit, name, sha256=item.sha256,
                                       size=item.size)  # fmt: skip
    version = shape.version(kept.time)
    url = index_url_of(index, commit_dir(kept.commit), None)
    if problems:
        detail = f"{len(problems)} problem(s); first: {problems[0]}"
        return Check(subject=version, check="kept", ok=False, detail=detail, url=url)
    detail = f"kept {kept.commit[:12]}: every page and file is there"
    return Check(subject=version, check="kept", ok=True, detail=detail, url=url)


def _head_problems(
    client: Client, index: str, commit: str, name: str, *, sha256: str | None, size: int | None
) -> list[str]:
    wheel = url_of(index, f"{commit}/{name}")
    there = http_edge.first_byte(client, wheel)
    if there.status not in (200, 206):
        return [f"{wheel}: {there.error or f'HTTP {there.status}'}"]
    problems = []
    recorded = there.headers.get(f"x-amz-meta-{SHA256}")
    if recorded != sha256:
        problems.append(f"{wheel}: holds sha256 {str(recorded)[:12]}, its page lists another")
    headers = there.headers
    total = headers.get("content-range", "").rpartition("/")[2] or headers.get("content-length")
    if size is not None and total != str(size):
        problems.append(f"{wheel}: {total} bytes, not {size}")
    metadata = http_edge.first_byte(client, wheel + METADATA_SUFFIX)
    if metadata.status not in (200, 206):
        problems.append(f"{wheel}{METADATA_SUFFIX}: {metadata.error or metadata.status}")
    return problems


def explained_keys(state: NightlyState, nightly: Nightly, project: str) -> set[str]:
    """Every key under the prefix that `state` accounts for (the archive aside)."""
    prefix = nightly.destination.prefix
    keys = {prefix + STATE_KEY}
    if nightly.keep_list_object:
        keys.add(prefix + nightly.keep_list_object)
    for label in {"", *state.roots}:
        root = f"{prefix}{NIGHTLY_DIR}{label_dir(label)}"
        page = prefix + page_dir(NIGHTLY_DIR, label, project)
        keys |= {root, root + JSON_PAGE, page, page + JSON_PAGE}
    entries: list[Kept | Uploading | Pruning] = [*state.kept, *state.uploading, *state.pruning]
    for entry in entries:
        shape = state.shapes[entry.shape]
        keys |= set(commit_keys(prefix, entry.commit, entry.time, shape, project))
    return keys


def unexplained_checks(
    state: NightlyState, nightly: Nightly, project: str, reach: Reach
) -> list[Check]:
    """The objects under the prefix the state cannot explain (nothing is deleted): a
    listing, with the bucket's keys from the environment; without them, not listed."""
    destination = nightly.destination
    subject = f"s3://{destination.bucket}/{destination.prefix}"
    if reach.s3_keys is None:
        detail = "not listed: no AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the environment"
        return [Check(subject=subject, check="objects", ok=True, detail=detail)]
    bucket = Bucket(name=destination.bucket, endpoint=destination.endpoint,
                    region=destination.region)  # fmt: skip
    try:
        listed = reach.s3(bucket).list(destination.prefix)
    except PublishError as error:
        return [Check(subject=subject, check="objects", ok=False, detail=error.message)]
    archive = destination.prefix + nightly.archive_prefix
    known = explained_keys(state, nightly, project)
    strays = sorted(k for k in listed if k not in known and not k.startswith(archive))
    checks = [
        Check(subject=one_line(key), check="objects", ok=False, url=url_of(destination.index_url,
              key[len(destination.prefix):]),
              detail="not explained by the channel's state (left as it is)")
        for key in strays[:MAX_UNEXPLAINED]
    ]  # fmt: skip
    if len(strays) > MAX_UNEXPLAINED:
        more = len(strays) - MAX_UNEXPLAINED
        checks.append(Check(subject=subject, check="objects", ok=False,
                            detail=f"{more} more objects not explained by the state"))  # fmt: skip
    if not strays:
        detail = f"every one of the {len(listed)} objects is the state's or archived"
        checks.append(Check(subject=subject, check="objects", ok=True, detail=detail))
    return checks
