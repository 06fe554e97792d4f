"""The symbol versions an ELF file asks of the C and C++ runtimes (GLIBC_2.34,
GLIBCXX_3.4.21, CXXABI_1.3.9, GCC_4.8.0) against the manylinux tag its wheel carries, by
auditwheel's policy data (`auditwheel.policy.WheelPolicies`: the same table `auditwheel
show` judges by, legacy names such as manylinux2014 included).

As auditwheel's own verdict (`versioned_symbols_policy`), a version counts only under a
name the policy lists (GLIBC, GLIBCXX, CXXABI, GCC, ZLIB, ...): a library's own versions
(`libcudart.so.13`) are not the runtime's. Pure, given the policy data.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Sequence

from auditwheel.architecture import Architecture  # type: ignore[import-untyped]
from auditwheel.libc import Libc  # type: ignore[import-untyped]
from auditwheel.policy import Policy, WheelPolicies  # type: ignore[import-untyped]

from release.inspection.elffacts import ElfFacts

# auditwheel logs why a policy is not met at debug level; its verdict is ours to word
logging.getLogger("auditwheel").addHandler(logging.NullHandler())

_MANYLINUX = re.compile(r"manylinux(?:1|2010|2014|_\d+_\d+)_(?P<arch>[a-z0-9_]+)")


def manylinux_tags(platforms: Iterable[str]) -> tuple[str, ...]:
    """The manylinux platform tags among `platforms` (a filename's), sorted."""
    return tuple(sorted(p for p in set(platforms) if _MANYLINUX.fullmatch(p)))


def tag_arch(platform: str) -> str | None:
    """The CPU arch a Linux platform tag names (`manylinux_2_28_x86_64`, `linux_aarch64`:
    `x86_64`, `aarch64`), or None for any other platform."""
    found = _MANYLINUX.fullmatch(platform)
    if found is not None:
        return found["arch"]
    return platform.removeprefix("linux_") if platform.startswith("linux_") else None


@functools.cache
def _policies(arch: str) -> WheelPolicies | None:
    try:
        return WheelPolicies(libc=Libc.GLIBC, arch=Architecture(arch))
    except ValueError:
        return None


def policy_of(tag: str) -> Policy | None:
    """auditwheel's policy for a manylinux tag (by its name or a legacy alias), or None
    where auditwheel has none (an arch or a glibc it does not know)."""
    arch = tag_arch(tag)
    policies = _policies(arch) if arch else None
    if policies is None:
        return None
    try:
        return policies.get_policy_by_name(tag)
    except LookupError:
        return None


def _version_key(version: str) -> tuple[tuple[int, int, str], ...]:
    """Orders versions part by part, a number by its value (compared as digits: a symbol
    version may hold more than int() reads, or a digit that is not an ASCII one)."""
    return tuple(
        (1, len(p.lstrip("0")), p.lstrip("0")) if p.isascii() and p.isdigit() else (0, 0, p)
        for p in re.split(r"[._]", version)
    )


def too_new(facts: ElfFacts, policy: Policy) -> dict[str, list[str]]:
    """The versions `facts` needs beyond `policy`, by runtime name (GLIBC: [GLIBC_2.34])."""
    beyond: dict[str, list[str]] = {}
    for _, version in facts.symbol_versions:
        name, _, number = version.partition("_")
        allowed = policy.symbol_versions.get(name)
        if allowed is not None and number not in allowed:
            beyond.setdefault(name, []).append(version)
    return beyond


def symbol_problems(elfs: Sequence[ElfFacts], tags: Iterable[str]) -> list[tuple[str, str]]:
    """(member, detail) for each ELF file that asks a runtime version newer than a manylinux
    tag of `tags` allows: the newest it asks, and the newest the policy allows."""
    problems: list[tuple[str, str]] = []
    judged: set[str] = set()  # manylinux_2_17_x86_64 and manylinux2014_x86_64 are one policy
    for tag in manylinux_tags(tags):
        policy = policy_of(tag)
        if policy is None or policy.name in judged:
            continue
        judged.add(policy.name)
        for facts in elfs:
            for name, versions in sorted(too_new(facts, policy).items()):
                needs = max(versions, key=lambda v: _version_key(v.partition("_")[2]))
                allows = max(policy.symbol_versions[name], key=_version_key, default=None)
                more = f" (and {len(versions) - 1} more)" if len(versions) > 1 else ""
                limit = f"{name}_{allows}" if allows else f"no {name} version"
                problems.append(
                    (
                        facts.member,
                        f"{facts.member} needs {needs}{more}; {tag} allows at most {limit}",
                    )
                )
    return problems


def known_policy(tags: Iterable[str]) -> bool:
    """Whether auditwheel has a policy for any manylinux tag of `tags`."""
    return any(policy_of(tag) is not None for tag in manylinux_tags(tags))
