"""What the inspection of a wheel as served, and of the index pages that list it, can find:
the rules (an id and what each checks) and a finding (rule, file, URL, one-line detail).

`release audit` prints its summary by these rules and `release verify` names a finding's
rule as its check; docs/verify.md lists them with the case that proves each.
"""

from __future__ import annotations

from dataclasses import dataclass

from release.errors import one_line


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: str
    checks: str  # what it checks, in a few words
    scope: str  # "wheel": one wheel's bytes; "index": what the pages list, across wheels


RULES: tuple[Rule, ...] = (
    Rule(
        id="download",
        checks="every listed file downloads (HTTP 200) within the per-file time limit",
        scope="wheel",
    ),
    Rule(
        id="archive",
        checks="a wheel filename, a zip whose members read back, one .dist-info, RECORD's "
        "hashes and sizes",
        scope="wheel",
    ),
    Rule(
        id="filename",
        checks="the filename's name, version and tags are METADATA's and WHEEL's",
        scope="wheel",
    ),
    Rule(
        id="manylinux",
        checks="every ELF's machine and GLIBC/GLIBCXX/CXXABI/GCC symbol versions fit the "
        "manylinux tag (auditwheel's policy)",
        scope="wheel",
    ),
    Rule(
        id="cuda-major",
        checks="the CUDA major of every NEEDED CUDA library matches the local label (+cu129: "
        "12) and the other CUDA libraries",
        scope="wheel",
    ),
    Rule(
        id="torch",
        checks="a wheel that links libtorch/libc10 requires torch, and a torch built for the "
        "CUDA major of its CUDA libraries",
        scope="wheel",
    ),
    Rule(
        id="device-code",
        checks="every fatbin reads (cuobjdump) and holds the SMs and PTX asked for; across "
        "arches, the same",
        scope="wheel",
    ),
    Rule(
        id="duplicate",
        checks="no filename is listed twice on a page (same or other hashes)",
        scope="index",
    ),
    Rule(
        id="hash",
        checks="each link's hash (sha256, or md5... as pip checks), its PEP 658 metadata's "
        "sha256 and a PEP 691 page's size are those of the bytes served",
        scope="index",
    ),
    Rule(
        id="missing-arch",
        checks="each version and variant has every arch its neighbours or other variants have",
        scope="index",
    ),
    Rule(
        id="unindexed-variant",
        checks="a variant listed for the versions around one is listed for it too",
        scope="index",
    ),
    Rule(
        id="stray-link",
        checks="an index page links no file of the release's version that the release lacks "
        "(verify)",
        scope="index",
    ),
    Rule(
        id="missing-variant",
        checks="every variant and arch the matrix names has its wheel, listed (verify)",
        scope="index",
    ),
)
RULE_IDS = tuple(rule.id for rule in RULES)


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One thing wrong: which rule, in which file (a wheel's filename, or an index page's
    URL for a rule about a page), where it was read, and why in one line."""

    rule: str
    file: str
    url: str
    detail: str


def finding(rule: str, file: str, url: str, detail: str) -> Finding:
    """A finding of a known rule (a typo in a rule id is a bug, caught here)."""
    if rule not in RULE_IDS:
        raise ValueError(f"no rule {rule!r}")
    return Finding(rule=rule, file=one_line(file), url=one_line(url), detail=one_line(detail))
