"""Where the nightly channel keeps everything under the destination's prefix.

```
<prefix>state.json                          the channel's state (release.nightly.state)
<prefix><commit>/<wheel>                    each commit's wheels, immutable
<prefix><commit>/<wheel>.metadata           PEP 658: the wheel's METADATA
<prefix><commit>/<label/><project>/          its PEP 503 project page, per variant
<prefix><commit>/<label/><project>/index.json  and its PEP 691 one
<prefix>nightly/<label/>                    the channel's root pages (and index.json)
<prefix>nightly/<label/><project>/           the newest whole commit's pages (and index.json)
<prefix><archive-prefix><commit>/<wheel>    wheels that fell out of retention, archived
```

A page's key is the URL path pip asks for (`.../k3-kernels/`): any S3-compatible store
that serves the bucket by path (the S3 REST endpoint, R2's public bucket, MinIO, a CDN in
front of them) serves it as is. Links are relative (`../../<commit>/<wheel>#sha256=...`),
so the pages work under whatever host serves the prefix, and a `/nightly/` page links the
immutable files of its commit: no page ever links a file that is not uploaded, and moving
/nightly/ copies no wheel. Each page carries `#sha256=` on every link, the `.metadata`
digest (PEP 658/714) and Requires-Python, rendered by release.destinations.index.

Pure: keys and URLs; the pages are rendered by release.nightly.pages.
"""

from __future__ import annotations

from urllib.parse import quote

from packaging.utils import canonicalize_name

from release.nightly.state import Shape
from release.wheelfile import WheelName

STATE_KEY = "state.json"
NIGHTLY_DIR = "nightly/"
JSON_PAGE = "index.json"
METADATA_SUFFIX = ".metadata"  # PEP 658: a wheel's METADATA at the wheel's URL + this
IMMUTABLE = "public, max-age=31536000, immutable"  # a commit's files never change
NO_CACHE = "no-cache"  # /nightly/ and the state: every reader asks the store again
HTML_TYPE = "text/html; charset=utf-8"
WHEEL_TYPE = "application/octet-stream"
METADATA_TYPE = "text/plain; charset=utf-8"
GENERATION = "generation"  # the metadata key of a /nightly/ page: the promotion that wrote it
SHA256 = "sha256"  # the metadata key of a commit's file: the sha256 of its bytes


def commit_dir(commit: str) -> str:
    return f"{commit}/"


def file_key(prefix: str, commit: str, filename: str) -> str:
    return f"{prefix}{commit_dir(commit)}{filename}"


def archive_key(prefix: str, archive: str, commit: str, filename: str) -> str:
    return f"{prefix}{archive}{commit_dir(commit)}{filename}"


def label_dir(label: str | None) -> str:
    return f"{label}/" if label else ""


def page_dir(directory: str, label: str | None, project: str) -> str:
    """`<commit>/cu129/k3-kernels/`: a project page's place under the prefix."""
    return f"{directory}{label_dir(label)}{canonicalize_name(project)}/"


def url_of(index_url: str, relative: str) -> str:
    """The public URL of a key under the prefix (`+` and other reserved characters
    percent-encoded, as S3 behind some CDNs would read a plain `+` as a space)."""
    return index_url + quote(relative, safe="/")


def index_url_of(index_url: str, directory: str, label: str | None) -> str:
    """What pip is given: `<index_url>nightly/cu129/`, `<index_url><commit>/`."""
    return index_url + directory + label_dir(label)


def link(page: str, commit: str, filename: str) -> str:
    """The relative link from a page at `page` (under the prefix) to a commit's file."""
    depth = page.count("/")
    return "../" * depth + quote(f"{commit_dir(commit)}{filename}", safe="/")


def label_of(filename: str) -> str:
    return WheelName.parse(filename).local_label or ""


def commit_keys(prefix: str, commit: str, time: int, shape: Shape, project: str) -> list[str]:
    """Every object of one commit: its wheels, their `.metadata`, its pages."""
    keys = []
    for name in shape.wheel_names(time):
        keys += [file_key(prefix, commit, name), file_key(prefix, commit, name + METADATA_SUFFIX)]
    for label in shape.labels:
        where = prefix + page_dir(commit_dir(commit), label, project)
        keys += [where, where + JSON_PAGE]
    return keys
