"""A stand-in torch index on 127.0.0.1, shaped like PyPI's: a PEP 691 (or, asked for
HTML, PEP 503) project page for torch, and for each wheel its PEP 658 METADATA file beside it
(announced as `core-metadata`, or left unannounced) and the wheel itself, a small zip that
holds that METADATA and answers HTTP range requests. The METADATA is PyPI's own for torch
2.10.0 (CUDA 12.8: `nvidia-cuda-runtime-cu12==12.8.90`) and 2.11.0 (CUDA 13:
`cuda-toolkit[...]==13.0.2`), its description left out (tests/data/torch_index), given to
the other releases with their version. It records each request (its path and Range
header) and the wheel bytes it served; it can ignore range requests, as some servers do.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.integration.indexes import serve

DATA = Path(__file__).resolve().parents[1] / "data" / "torch_index"
CUDA12 = (DATA / "torch-2.10.0.METADATA").read_text(encoding="utf-8")
CUDA13 = (DATA / "torch-2.11.0.METADATA").read_text(encoding="utf-8")

# PyPI's torch releases around the move to CUDA 13, as (version, METADATA of that CUDA)
PYPI_LIKE = (("2.9.1", CUDA12), ("2.10.0", CUDA12), ("2.11.0", CUDA13), ("2.12.0", CUDA13),
             ("2.14.1", CUDA13))  # fmt: skip
# a wheel for the CPython running the tests too (a torch cell's environment is made with it)
PYTHONS = tuple(dict.fromkeys(("cp310", "cp311", f"cp3{sys.version_info.minor}")))


def metadata_of(version: str, template: str) -> bytes:
    """`template` (one of PyPI's torch METADATA files) as release `version`'s."""
    return re.sub(r"(?m)^Version: .*$", f"Version: {version}", template, count=1).encode()


# 1 MiB that deflate cannot shrink: a wheel larger than what reading its METADATA may take
BULK = b"".join(hashlib.sha256(n.to_bytes(4, "big")).digest() for n in range(32768))


def wheel_of(version: str, metadata: bytes) -> bytes:
    """A wheel-shaped zip of torch `version`: 1 MiB of bulk first (as torch's libraries
    are), then its .dist-info."""
    buffer = io.BytesIO()
    public = version.split("+", maxsplit=1)[0]
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("torch/lib/libtorch_bulk.so", BULK)
        archive.writestr(f"torch-{public}.dist-info/METADATA", metadata)
        archive.writestr(f"torch-{public}.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return buffer.getvalue()


@dataclass
class StandInIndex:
    """What the stand-in serves: files by name, and whether the page announces PEP 658."""

    url: str = ""  # its simple index root, `http://127.0.0.1:PORT/simple/`
    announce_metadata: bool = True
    json_page: bool = True  # False: the PEP 503 HTML page, whatever the client accepts
    ignores_ranges: bool = False  # True: a wheel is answered whole (200), Range or not
    wheels: dict[str, bytes] = field(default_factory=dict)
    metadata: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range)
    served_wheel_bytes: int = 0

    def add(self, version: str, template: str, arch: str = "x86_64") -> None:
        """The release's Linux `arch` wheels for each of PYTHONS."""
        data = metadata_of(version.split("+", maxsplit=1)[0], template)
        for python in PYTHONS:
            name = f"torch-{version}-{python}-{python}-manylinux_2_28_{arch}.whl"
            self.wheels[name] = wheel_of(version, data)
            self.metadata[name] = data

    def page(self, json_page: bool) -> tuple[bytes, str]:
        if json_page:
            digest = {n: hashlib.sha256(d).hexdigest() for n, d in self.metadata.items()}
            files = [
                {
                    "filename": name,
                    "url": f"/files/{name}",
                    "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                    **(
                        {"core-metadata": {"sha256": digest[name]}}
                        if self.announce_metadata
                        else {}
                    ),
                }
                for name, data in sorted(self.wheels.items())
            ]  # fmt: skip
            body = {"meta": {"api-version": "1.1"}, "name": "torch", "files": files}
            return json.dumps(body).encode(), "application/vnd.pypi.simple.v1+json"
        anchors = "".join(
            f'<a href="/files/{name.replace("+", "%2B")}#sha256='
            f'{hashlib.sha256(data).hexdigest()}">{name}</a><br/>\n'
            for name, data in sorted(self.wheels.items())
        )
        return f"<html><body>\n{anchors}</body></html>\n".encode(), "text/html"


def _handler(index: StandInIndex) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            index.requests.append((self.path, self.headers.get("Range")))
            path = self.path.replace("%2B", "+")
            if path == "/simple/torch/" and index.wheels:
                wants_json = "json" in self.headers.get("Accept", "")
                body, kind = index.page(index.json_page and wants_json)
                self._send(200, body, kind)
            elif path.startswith("/files/") and path.endswith(".metadata"):
                data = index.metadata.get(path[len("/files/") : -len(".metadata")])
                self._send(200, data) if data is not None else self.send_error(404)
            elif path.startswith("/files/") and path[len("/files/") :] in index.wheels:
                self._wheel(index.wheels[path[len("/files/") :]])
            else:
                self.send_error(404)

        def _wheel(self, data: bytes) -> None:
            wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            if wanted is None or index.ignores_ranges:
                index.served_wheel_bytes += len(data)
                self._send(200, data)
                return
            first, last = int(wanted.group(1)), min(int(wanted.group(2)), len(data) - 1)
            index.served_wheel_bytes += last + 1 - first
            self._send(206, data[first : last + 1], range_of=(first, last, len(data)))

        def _send(
            self,
            status: int,
            body: bytes,
            kind: str = "application/octet-stream",
            range_of: tuple[int, int, int] | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            if range_of is not None:
                self.send_header("Content-Range", "bytes {}-{}/{}".format(*range_of))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serving(index: StandInIndex) -> Iterator[StandInIndex]:
    """`index` served on a free port of 127.0.0.1, its `url` set, until the block ends."""
    with serve(_handler(index)) as url:
        index.url = url + "simple/"
        yield index


def pypi_like(*, announce_metadata: bool = True) -> StandInIndex:
    """PyPI's torch releases 2.9.1 to 2.14.1 (2.9.1 and 2.10.0 on CUDA 12.8, the others on
    CUDA 13), with or without PEP 658 metadata announced."""
    index = StandInIndex(announce_metadata=announce_metadata)
    for version, template in PYPI_LIKE:
        index.add(version, template)
    return index
