"""What an index's pages say across wheels, checked whole: a filename listed twice, a listed
hash that is not the served bytes', an arch or a variant missing where the rest of the
index says it belongs, and (for `release verify`, which knows the release) a link to a
file the release does not have. Pure: listings in, findings out.

Where a wheel is expected is inferred from the index itself, never from a guess about the
project: a version and variant (`+cu129`, or the default) lacks an arch when both versions
around it of that variant have it (the newest: the version before it), or when another
variant of the same version has it and this variant ships that arch elsewhere (or exists
only in this version). A variant lacks a version when it is listed for an older and a
newer one, or for the version before the newest but not the newest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from release.inspection.findings import Finding, finding
from release.inspection.symbols import tag_arch
from release.remote.simple_index import ListedFile
from release.wheelfile import NotAWheel, WheelName

SHOWN_HASH = 12


def duplicates(page: str, files: Sequence[ListedFile]) -> list[Finding]:
    """One finding per filename `page` lists more than once."""
    seen: dict[str, list[ListedFile]] = {}
    for listed in files:
        seen.setdefault(listed.name, []).append(listed)
    found = []
    for name, listings in seen.items():
        if len(listings) < 2:
            continue
        hashes = list(
            dict.fromkeys(str(one.sha256 or one.hash_name or "no hash") for one in listings)
        )
        times = "twice" if len(listings) == 2 else f"{len(listings)} times"
        if len(hashes) == 1:
            detail = f"listed {times}, with the same sha256"
        else:
            shown = ", ".join(h[:SHOWN_HASH] for h in hashes)
            detail = f"listed {times} with {len(hashes)} different hashes ({shown})"
        found.append(finding("duplicate", name, page, detail))
    return found


# the hashes pip checks a link's fragment with (pip._internal.utils.hashes)
CHECKED_HASHES = ("sha256", "sha384", "sha512", "sha224", "sha1", "md5")


def hash_mismatch(where: str, listed: ListedFile, served: Mapping[str, str]) -> Finding | None:
    """The hash a link carries (`where` says whose: "the page URL", "the #sha256= of
    argument 1") against the same hash of the bytes served at its URL (`served`: hex
    digests by hash name); None where they agree or `served` lacks that hash."""
    name = listed.hash_name
    stated = listed.sha256 if name == "sha256" else listed.digest
    got = served.get(name) if name is not None else None
    if stated is None or got is None or stated == got:
        return None
    return finding(
        "hash",
        listed.name,
        listed.url,
        f"{where} says {name} {stated[:SHOWN_HASH]}..., the bytes served are {got[:SHOWN_HASH]}...",
    )


def metadata_mismatch(where: str, listed: ListedFile, served: str | None) -> Finding | None:
    """The sha256 a link gives its PEP 658 metadata file (what pip resolves from before it
    downloads the wheel) against that of the METADATA the wheel served holds (`served`)."""
    stated = listed.metadata_sha256
    if stated is None or served is None or stated == served:
        return None
    return finding(
        "hash", listed.name, listed.url,
        f"{where} says its METADATA (PEP 658) has sha256 {stated[:SHOWN_HASH]}..., the "
        f"wheel's METADATA has {served[:SHOWN_HASH]}... (pip resolves from the listed one)",
    )  # fmt: skip


def size_mismatch(where: str, listed: ListedFile, served_size: int) -> Finding | None:
    """The size a PEP 691 page gives a file (PEP 700) against the bytes served."""
    if listed.size is None or listed.size == served_size:
        return None
    return finding(
        "hash", listed.name, listed.url,
        f"{where} says {listed.size} bytes, the bytes served are {served_size}",
    )  # fmt: skip


def listing_findings(
    where: str,
    listed: ListedFile,
    *,
    digests: Mapping[str, str],
    size: int,
    metadata_sha256: str | None = None,
) -> list[Finding]:
    """One listing held to the bytes served at its URL, by the `hash` rule: the hash it
    carries (against `digests`, the hex digests of those bytes by hash name; one it lacks is
    not compared), the size a PEP 691 page gives (PEP 700) against `size`, and the sha256 it
    gives its PEP 658 metadata against `metadata_sha256` (that of the wheel's own METADATA;
    None: not compared). `release audit` and `release verify` both ask it."""
    found = [
        hash_mismatch(where, listed, digests),
        size_mismatch(where, listed, size),
        metadata_mismatch(where, listed, metadata_sha256),
    ]
    return [one for one in found if one is not None]


@dataclass(frozen=True, kw_only=True)
class ListedWheel:
    """A wheel of a project as some page lists it: its public version, variant (local
    label, None for the default) and arch."""

    project: str
    version: Version  # public: 0.2.0 of 0.2.0+cu129
    label: str | None
    arch: str
    page: str


def variant_name(version: Version, label: str | None) -> str:
    return f"{version}+{label}" if label else f"{version}"


def _by_variant(wheels: Iterable[ListedWheel]) -> dict[str | None, dict[Version, set[str]]]:
    found: dict[str | None, dict[Version, set[str]]] = {}
    for wheel in wheels:
        found.setdefault(wheel.label, {}).setdefault(wheel.version, set()).add(wheel.arch)
    return found


def _pages(wheels: Iterable[ListedWheel]) -> dict[tuple[str | None, Version | None], str]:
    pages: dict[tuple[str | None, Version | None], str] = {}
    for wheel in wheels:
        pages.setdefault((wheel.label, wheel.version), wheel.page)
        pages.setdefault((wheel.label, None), wheel.page)
    return pages


def _expected_arches(
    variants: Mapping[str | None, Mapping[Version, set[str]]],
    label: str | None,
    versions: Sequence[Version],
    at: int,
    shipped_by: Mapping[str, int],
) -> dict[str, str]:
    """arch -> why `versions[at]` of `label` should have a wheel of it (see the module doc);
    `versions` are the label's, in order, and `shipped_by` counts its versions with a wheel
    of each arch (precomputed: a page of 20,000 versions took minutes done per version)."""
    arches = variants[label]
    version = versions[at]
    expected: dict[str, str] = {}
    if 0 < at < len(versions) - 1:
        before, after = versions[at - 1], versions[at + 1]
        for arch in arches[before] & arches[after]:
            expected[arch] = (
                f"{variant_name(before, label)} and {variant_name(after, label)} have one"
            )
    elif at == len(versions) - 1 and at > 0:
        before = versions[at - 1]
        for arch in arches[before]:
            expected[arch] = f"{variant_name(before, label)}, the version before, has one"
    own = arches[version]
    for other, other_arches in variants.items():
        if other == label or version not in other_arches:
            continue
        for arch in other_arches[version]:
            shipped = shipped_by.get(arch, 0) - (arch in own) > 0  # by another version
            if shipped or len(versions) == 1:
                expected.setdefault(arch, f"{variant_name(version, other)} has one")
    return expected


def missing_arches(project: str, wheels: Sequence[ListedWheel]) -> list[Finding]:
    """A version and variant without an arch that the index says it should have."""
    variants = _by_variant(wheels)
    pages = _pages(wheels)
    found = []
    for label, arches in sorted(variants.items(), key=lambda kv: kv[0] or ""):
        versions = sorted(arches)
        shipped_by = Counter(arch for found_arches in arches.values() for arch in found_arches)
        for at, version in enumerate(versions):
            expected = _expected_arches(variants, label, versions, at, shipped_by)
            for arch, why in sorted(expected.items()):
                if arch not in arches[version]:
                    found.append(
                        finding(
                            "missing-arch",
                            f"{project} {variant_name(version, label)}",
                            pages[(label, version)],
                            f"no {arch} wheel, and {why} (a partial upload?)",
                        )
                    )
    return found


def unindexed_variants(project: str, wheels: Sequence[ListedWheel]) -> list[Finding]:
    """A variant the index lists for the versions around one, and not for it."""
    variants = _by_variant(wheels)
    pages = _pages(wheels)
    every = sorted({wheel.version for wheel in wheels})
    found = []
    for label, arches in sorted(variants.items(), key=lambda kv: kv[0] or ""):
        present = sorted(arches)
        lacking = [v for v in every if present[0] < v < present[-1] and v not in arches]
        reasons = dict.fromkeys(lacking, "listed for versions before and after it")
        newest = every[-1]
        if newest not in arches and len(every) > 1 and every[-2] in arches:
            reasons[newest] = f"listed for {variant_name(every[-2], label)}, the version before"
        for version, why in sorted(reasons.items()):
            what = f"+{label}" if label else "the default variant"
            found.append(
                finding(
                    "unindexed-variant",
                    f"{project} {variant_name(version, label)}",
                    pages[(label, None)],
                    f"{version} has wheels, none of {what}: {why} (released, never indexed?)",
                )
            )
    return found


def listed_wheel(filename: str, page: str) -> ListedWheel | None:
    """The ListedWheel of a wheel `page` lists, or None for a file that is not a wheel of
    one Linux arch."""
    try:
        name = WheelName.parse(filename)
    except NotAWheel:
        return None
    arches = {tag_arch(tag.platform) for tag in name.tags} - {None}
    if len(arches) != 1:
        return None
    return ListedWheel(
        project=str(name.project),
        version=Version(name.version.public),
        label=name.version.local,
        arch=str(arches.pop()),
        page=page,
    )


def stray_links(
    page: str, files: Sequence[ListedFile], version: str, release_files: Iterable[str]
) -> list[Finding]:
    """Links of `page` to a wheel of the release's `version` that the release lacks. An
    earlier build of a wheel the release published under a build tag (`NAME` beside
    `NAME-1-...`: `publish --build-tag` leaves the old bytes where they were) is the
    release's."""
    have = set(release_files)
    newest = _newest_builds(have)
    found = []
    for listed in files:
        if listed.name in have:
            continue
        try:
            name = WheelName.parse(listed.name)
        except NotAWheel:
            continue
        if name.build < newest.get(name.with_build(()).filename, ()):
            continue
        if Version(name.version.public) == Version(Version(version).public):  # 0.1.0.0 too
            detail = f"{page} links a wheel of {version} that the release does not have"
            found.append(finding("stray-link", listed.name, listed.url, detail))
    return found


def _newest_builds(names: Iterable[str]) -> dict[str, tuple[int, str]]:
    """The build tag of each wheel of `names` that has one, by its name without it."""
    out: dict[str, tuple[int, str]] = {}
    for filename in names:
        try:
            name = WheelName.parse(filename)
        except NotAWheel:
            continue
        if name.build:
            key = name.with_build(()).filename
            out[key] = max(out.get(key, name.build), name.build)
    return out


@dataclass(frozen=True, kw_only=True)
class ListedDeviceCode:
    """The device code a listed wheel was found to hold."""

    wheel: ListedWheel
    filename: str
    url: str
    sms: tuple[str, ...]
    ptx: tuple[str, ...]


def device_code_gaps(project: str, listed: Sequence[ListedDeviceCode]) -> list[Finding]:
    """A wheel without an SM or PTX target that another arch's wheel of the same version and
    variant holds (sglang#29317: an aarch64 cu130 wheel without sm121 code)."""
    groups: dict[tuple[Version, str | None], list[ListedDeviceCode]] = {}
    for one in listed:
        groups.setdefault((one.wheel.version, one.wheel.label), []).append(one)
    found = []
    for (version, label), wheels in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")
    ):
        for one in wheels:
            for other in wheels:
                if other.wheel.arch == one.wheel.arch:
                    continue
                lacking = [f"sm_{s}" for s in other.sms if s not in one.sms]
                lacking += [f"compute_{p}" for p in other.ptx if p not in one.ptx]
                if lacking:
                    found.append(
                        finding(
                            "device-code",
                            one.filename,
                            one.url,
                            f"no {', '.join(lacking)} code, which the {other.wheel.arch} wheel "
                            f"of {project} {variant_name(version, label)} holds",
                        )
                    )
                    break
    return found
