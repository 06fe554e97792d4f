"""moto's S3 API on 127.0.0.1, as `moto_server` serves it, with three things added in front.

- **Writes one at a time, reads never during one.** moto checks a conditional write's
  condition (`If-None-Match`, `If-Match`) and then writes, in separate steps of a threaded
  server: two racing conditional PUTs of one key can both succeed there (measured: 2 of 200
  races of 8 `If-Match` writers had two winners), which AWS S3, R2 and MinIO never allow.
  And an overwrite closes the old object's buffer while a GET may still be reading it: that
  GET answers 500 (measured: 33 of 2383 GETs of a 2 MB object overwritten 255 times), where
  the real stores serve the whole old object or the whole new one. Here PUT, POST and DELETE
  run one at a time, and no read runs during a write (reads run side by side), so each
  object is read and written atomically, as the real stores do it.
- **A request log.** `GET /__requests__` answers every request since the last
  `DELETE /__requests__` as JSON (method, path, query, user agent): the count a benchmark
  reports is the server's own.
- **Faults.** `POST /__faults__` with `{"method": "PUT", "match": "aarch64", "status": 403,
  "times": 1}` answers the next matching request (its path contains `match`) with that
  status; `"hang": true` holds it instead until `DELETE /__faults__` (so a test can kill
  the client mid-request); `"after": true` lets it through to moto first and answers the
  status in place of moto's answer (a write that landed whose answer was lost). A 409
  answers with S3's `ConditionalRequestConflict` error document. Bucket names cannot hold
  `_`: these paths are never a bucket's.

Run: python tests/s3_server/serve.py PORT
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
HANG_LIMIT = 300.0  # seconds a held request waits at most


class ReadWriteLock:
    """Many readers or one writer; a waiting writer goes before new readers (a reader that
    polls in a loop cannot starve the writers)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._changed:
            while self._writing or self._waiting:
                self._changed.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._changed:
                self._readers -= 1
                self._changed.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._changed:
            self._waiting += 1
            while self._writing or self._readers:
                self._changed.wait()
            self._waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._changed:
                self._writing = False
                self._changed.notify_all()


class Front:
    """The WSGI middleware in front of moto's app (see the module doc)."""

    def __init__(self, app: Callable[[Environ, StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self.objects = ReadWriteLock()
        self.lock = threading.Lock()
        self.log: list[dict[str, str]] = []
        self.faults: list[dict[str, Any]] = []
        self.released = threading.Event()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == "/__requests__":
            return self._requests(method, start_response)
        if path == "/__faults__":
            return self._faults(method, environ, start_response)
        with self.lock:
            self.log.append(
                {
                    "method": method,
                    "path": path,
                    "query": environ.get("QUERY_STRING", ""),
                    "agent": environ.get("HTTP_USER_AGENT", ""),
                }
            )
            fault = next(
                (
                    f
                    for f in self.faults
                    if f["method"] == method and f["match"] in path and f["times"] > 0
                ),
                None,
            )
            if fault is not None:
                fault["times"] -= 1
        if fault is not None and fault.get("after"):
            # the request goes through, its answer is lost: a write that landed
            with self.objects.writing():
                list(self.app(environ, lambda *args, **kwargs: None))
            return _answer(start_response, int(fault.get("status", 503)), b"")
        if fault is not None:
            if fault.get("hang"):
                self.released.wait(HANG_LIMIT)
            return _answer(start_response, int(fault.get("status", 503)), b"")
        if method in ("PUT", "POST", "DELETE"):
            with self.objects.writing():
                return list(self.app(environ, start_response))
        with self.objects.reading():
            return list(self.app(environ, start_response))

    def _requests(self, method: str, start_response: StartResponse) -> Iterable[bytes]:
        with self.lock:
            body = json.dumps(self.log).encode()
            if method == "DELETE":
                self.log.clear()
        return _answer(start_response, 200, body, "application/json")

    def _faults(
        self, method: str, environ: Environ, start_response: StartResponse
    ) -> Iterable[bytes]:
        with self.lock:
            if method == "DELETE":
                self.faults.clear()
                self.released.set()
            elif method == "POST":
                size = int(environ.get("CONTENT_LENGTH") or 0)
                fault = json.loads(environ["wsgi.input"].read(size))
                fault.setdefault("times", 1)
                self.faults.append(fault)
                self.released.clear()
            body = json.dumps(self.faults).encode()
        return _answer(start_response, 200, body, "application/json")


CONFLICT = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ConditionalRequestConflict</Code>'
    b"<Message>A conflicting conditional operation is currently in progress against this "
    b"resource. Please try again.</Message></Error>"
)


def _answer(
    start_response: StartResponse, status: int, body: bytes, kind: str = "application/xml"
) -> Iterable[bytes]:
    reasons = {200: "OK", 403: "Forbidden", 409: "Conflict", 500: "Internal Server Error",
               503: "Slow Down"}  # fmt: skip
    if status == 409 and not body:
        body = CONFLICT
    start_response(
        f"{status} {reasons.get(status, 'Error')}",
        [("Content-Type", kind), ("Content-Length", str(len(body)))],
    )
    return [body]


class Dispatcher(DomainDispatcherApplication):
    """moto_server's dispatcher, which lists moto's package directory on every request to
    find the backend a host names (a quarter of the server's time): here once a host."""

    def __init__(self) -> None:
        super().__init__(create_backend_app)
        self._backends: dict[str | None, Any] = {}

    def get_backend_for_host(self, host: str | None) -> Any:
        if host not in self._backends:  # called under the dispatcher's own lock
            self._backends[host] = super().get_backend_for_host(host)
        return self._backends[host]


def main(argv: list[str]) -> None:
    port = int(argv[0])
    app = Dispatcher()
    run_simple(
        "127.0.0.1",
        port,
        Front(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
