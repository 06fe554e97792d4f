"""The one reader of requirement text this tool did not write (a wheel's or an index's
METADATA, a project's files): packaging's Requirement, except that a number of more digits
than any release holds is refused with the text packaging refuses. packaging parses such a
line and then fails comparing it (int() of more than 4,300 digits is a ValueError, not the
InvalidRequirement or InvalidVersion a caller expects), as pip fails on it."""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement

MAX_DIGITS = 32  # of one number in a requirement; no release, Python or CUDA has more
_LONG_NUMBER = re.compile(f"[0-9]{{{MAX_DIGITS + 1},}}")


def requirement(text: str) -> Requirement:
    """packaging's Requirement of `text`; InvalidRequirement where packaging refuses it or
    where a number in it has more than MAX_DIGITS digits."""
    long = _LONG_NUMBER.search(text)
    if long is not None:
        raise InvalidRequirement(
            f"it holds a number of {len(long.group())} digits, which no installer reads"
        )
    return Requirement(text)
