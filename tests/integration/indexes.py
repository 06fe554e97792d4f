"""Fixture indexes on 127.0.0.1: a static HTTP server serving a directory (as a static host,
GitHub Pages or S3 serves a pip index), and the PEP 503 pages and real wheels that make
each broken case of issue 54's table.

The server answers a directory's URL with its `index.html`, or with its `index.json` as
`application/vnd.pypi.simple.v1+json` when the request asks for PEP 691 JSON and the
directory has one (what a static host does with an Accept map). Each wheel's shared
objects are real ELF files: tests/data/elf's, or ones gcc compiles here in well under a
second (`compiled`), linked against stand-in sonames (libcudart.so.13, libc10.so).
"""

from __future__ import annotations

import hashlib
import html
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import BaseRequestHandler
from typing import ClassVar

from release.remote.simple_index import SIMPLE_JSON

RELEASE = Path(sys.executable).with_name("release")

ELF = Path(__file__).resolve().parents[1] / "data" / "elf"


@dataclass(frozen=True)
class Served:
    """One answer of the static server: the path asked for, the Accept header sent, and
    the file of the directory answered with (`index.json` or `index.html`) where it was one."""

    path: str
    accept: str
    page: str | None


class _StaticIndex(SimpleHTTPRequestHandler):
    wheel_delay = 0.0  # seconds before answering for a wheel (a slow host)
    served: list[Served] | None = None

    def send_head(self):  # type: ignore[no-untyped-def]  # the base class's own signature
        if self.path.endswith(".whl") and self.wheel_delay:
            time.sleep(self.wheel_delay)
        local = Path(self.translate_path(self.path))
        accept = self.headers.get("Accept", "")
        wants_json = SIMPLE_JSON in accept
        directory = self.path.split("?", 1)[0].endswith("/")
        page = None
        if directory and wants_json and (local / "index.json").is_file():
            page = "index.json"
        elif directory and (local / "index.html").is_file():
            page = "index.html"
        if self.served is not None:
            self.served.append(Served(path=self.path, accept=accept, page=page))
        if page == "index.json":
            body = (local / "index.json").read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", SIMPLE_JSON)
            self.send_header("Vary", "Accept")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return _Body(body)
        return super().send_head()

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Body:
    """A body `SimpleHTTPRequestHandler.copyfile` can read and close."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, size: int = -1) -> bytes:
        data, self.data = self.data, b""
        return data

    def close(self) -> None:
        pass


class QuietHandler(BaseHTTPRequestHandler):
    """A stand-in server's handler: it logs nothing and answers a body in one call."""

    def send_body(
        self, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class TricklingHeaders(QuietHandler):
    """Any GET: a status line, then one header a byte every `pause` seconds (well within any
    read timeout), `count` bytes in all, then an empty answer. A server that never lets a
    read time out."""

    count: ClassVar[int] = 400
    pause: ClassVar[float] = 0.05
    _sent: ClassVar[queue.SimpleQueue[int]] = queue.SimpleQueue()

    def do_GET(self) -> None:
        sent = 0
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(self.count):
                self.wfile.write(b"a")
                self.wfile.flush()
                sent += 1
                time.sleep(self.pause)
            self.wfile.write(b"\r\nContent-Type: text/html\r\nContent-Length: 0\r\n\r\n")
        except OSError:  # the client hung up
            pass
        finally:
            self.close_connection = True
            self._sent.put(sent)

    @classmethod
    def sent_before_hangup(cls) -> int:
        """How many header bytes the next answer got out before the client hung up (or all
        of them): the server notices a hang-up at its next write."""
        return cls._sent.get(timeout=30)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up on a slow answer (the time-limit tests) is no error here


@contextmanager
def serve(handler: Callable[..., BaseRequestHandler]) -> Iterator[str]:
    """`handler` answering on a free port of 127.0.0.1 in a thread until the block ends;
    yields the base URL (ending in /)."""
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def static_server(
    root: Path, *, wheel_delay: float = 0.0, served: list[Served] | None = None
) -> Iterator[str]:
    """`root` served on a free port of 127.0.0.1, each wheel after `wheel_delay` seconds,
    each answer appended to `served` where given; yields its base URL (ending in /)."""
    handler = type("_Delayed", (_StaticIndex,), {"wheel_delay": wheel_delay, "served": served})
    with serve(partial(handler, directory=str(root))) as url:
        yield url


def audited(page_url: str, *options: str) -> subprocess.CompletedProcess[str]:
    """`release audit PAGE_URL --no-torch-index --json OPTIONS...`, run to its end."""
    command = [str(RELEASE), "audit", page_url, "--no-torch-index", "--json", *options]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Link:
    """One anchor of a project page: a filename, where it points and the hash it states."""

    name: str
    href: str
    sha256: str | None
    metadata_sha256: str | None = None
    fragment: str | None = None  # the link's fragment as written, in place of #sha256=


def link_to(wheel: Path, page_dir: Path, *, sha: str | None = None) -> Link:
    """A link from the page in `page_dir` to `wheel`, with the wheel's own sha256 unless
    `sha` says another."""
    href = Path(*[".."] * len(page_dir.relative_to(wheel.parent.parent).parts), wheel.parent.name)
    return Link(
        name=wheel.name, href=f"{href.as_posix()}/{wheel.name}", sha256=sha or sha256(wheel)
    )


def write_page(page_dir: Path, links: Sequence[Link]) -> Path:
    """A PEP 503 project page in `page_dir`/index.html listing `links` in order."""
    page_dir.mkdir(parents=True, exist_ok=True)
    anchors = []
    for link in links:
        fragment = f"#sha256={link.sha256}" if link.sha256 else ""
        fragment = f"#{link.fragment}" if link.fragment is not None else fragment
        core = (
            f' data-core-metadata="sha256={link.metadata_sha256}"' if link.metadata_sha256 else ""
        )
        anchors.append(
            f'<a href="{html.escape(link.href + fragment)}"{core}>{html.escape(link.name)}</a><br>'
        )
    text = "<!DOCTYPE html>\n<html><body>\n" + "\n".join(anchors) + "\n</body></html>\n"
    (page_dir / "index.html").write_text(text, encoding="utf-8")
    return page_dir / "index.html"


def write_json_page(page_dir: Path, project: str, links: Sequence[Link]) -> Path:
    """A PEP 691 project page in `page_dir`/index.json listing `links` in order."""
    page_dir.mkdir(parents=True, exist_ok=True)
    files = [
        {
            "filename": link.name,
            "url": link.href,
            "hashes": {"sha256": link.sha256} if link.sha256 else {},
        }
        for link in links
    ]
    document = {"meta": {"api-version": "1.1"}, "name": project, "files": files}
    (page_dir / "index.json").write_text(json.dumps(document), encoding="utf-8")
    return page_dir / "index.json"


def write_root(root_dir: Path, projects: Sequence[str]) -> None:
    """A PEP 503 root page in `root_dir` naming `projects`."""
    anchors = "\n".join(f'<a href="{p}/">{p}</a><br>' for p in projects)
    (root_dir / "index.html").write_text(f"<html><body>\n{anchors}\n</body></html>\n")


@dataclass(frozen=True)
class Compiled:
    """Shared objects gcc made for the cases: real ELF files of this machine."""

    glibcxx: bytes  # asks GLIBCXX_3.4.21 (std::__cxx11 strings)
    cudart13: bytes  # NEEDs libcudart.so.13
    torch_cuda13: bytes  # NEEDs libc10.so and libcudart.so.13
    plain: bytes  # NEEDs libc only


def compiled(directory: Path) -> Compiled:
    """The shared objects of `Compiled`, each a gcc or g++ call of well under a second."""
    directory.mkdir(parents=True, exist_ok=True)
    sources = {
        "glibcxx.cpp": '#include <string>\nextern "C" const char* k3_name(int n) '
        "{ static std::string s; s = std::to_string(n); return s.c_str(); }\n",
        "stub.c": "int k3_stub(void) { return 0; }\n",
        "user.c": "int k3_stub(void);\nint k3_use(void) { return k3_stub(); }\n",
    }
    for name, text in sources.items():
        (directory / name).write_text(text)

    def run(*argv: str) -> None:
        subprocess.run(argv, cwd=directory, check=True, capture_output=True)

    run("g++", "-shared", "-fPIC", "-O0", "-o", "glibcxx.so", "glibcxx.cpp")
    for soname in ("libcudart.so.13", "libc10.so"):
        run("gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", soname, "stub.c")
    run("gcc", "-shared", "-fPIC", "-o", "cudart13.so", "user.c", "-L.", "-l:libcudart.so.13")
    run(
        "gcc", "-shared", "-fPIC", "-o", "torch13.so", "user.c", "-L.", "-Wl,--no-as-needed",
        "-l:libc10.so", "-l:libcudart.so.13",
    )  # fmt: skip
    run("gcc", "-shared", "-fPIC", "-o", "plain.so", "stub.c")
    return Compiled(
        glibcxx=(directory / "glibcxx.so").read_bytes(),
        cudart13=(directory / "cudart13.so").read_bytes(),
        torch_cuda13=(directory / "torch13.so").read_bytes(),
        plain=(directory / "plain.so").read_bytes(),
    )


def host_library(arch: str) -> bytes:
    """A small real library of `arch` that fits manylinux_2_28 (tests/data/elf)."""
    return (ELF / f"{arch}-glibc2.28.so").read_bytes()
