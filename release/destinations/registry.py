"""The destination kinds by name (matrix.yaml's `kind:`, the manifest's and the publish
record's `kind`): the one table the stages look a kind up in. Its value type and loading
are release.matrix.destination's (its `KINDS` table has the same names).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from release.destinations.base import DestinationKind
from release.destinations.git_index import GIT_INDEX
from release.destinations.github import GITHUB
from release.destinations.pypi import PYPI
from release.destinations.reach import Reach
from release.destinations.s3 import S3
from release.matrix import Destination
from release.remote.httpclient import OriginAuth

KINDS: Mapping[str, DestinationKind] = {kind.name: kind for kind in (PYPI, GITHUB, S3, GIT_INDEX)}


def kind_of(name: str) -> DestinationKind:
    """The kind named `name` (one the manifest or the matrix names: loading checked it)."""
    return KINDS[name]


def find_kind(name: str) -> DestinationKind | None:
    """The kind named `name`, or None (a record of another tool's destinations)."""
    return KINDS.get(name)


def index_auth(destinations: Iterable[Destination], reach: Reach) -> OriginAuth:
    """The upload credentials of each destination whose listing is an index of its own
    (PyPI), for its index's origin (sent only when the index asks: a private index)."""
    logins = [kind_of(d.kind).index_login(d, reach) for d in destinations]
    return OriginAuth(basic=reach.index_logins(login for login in logins if login is not None))
