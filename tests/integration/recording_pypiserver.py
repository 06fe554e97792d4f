"""pypiserver's own WSGI app behind a middleware that writes the fields of every upload
form, one JSON object a line, to a file: pypiserver accepts and ignores the `attestations`
field of an upload, so only the form shows what twine sent. Run as a script (its own
process: bottle installs import hooks) by the `recording_pypiserver` fixture; uploads need
no credentials.

    python recording_pypiserver.py PORT RECORD_FILE PACKAGES_DIR
"""

from __future__ import annotations

import email.parser
import email.policy
import io
import json
import sys
from collections.abc import Callable, Iterable
from email.message import EmailMessage
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pypiserver  # type: ignore[import-untyped]  # no stubs
from pypiserver.config import Config  # type: ignore[import-untyped]  # no stubs


def form_fields(content_type: str, body: bytes) -> dict[str, str]:
    """The fields of a multipart/form-data body; the file's field as its filename."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    assert isinstance(message, EmailMessage)
    fields = {}
    for part in message.iter_parts():
        assert isinstance(part, EmailMessage)
        name = str(part.get_param("name", header="content-disposition"))
        filename = part.get_filename()
        fields[name] = filename if filename is not None else str(part.get_content())
    return fields


class Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def main(port: int, record: str, packages: str) -> None:
    config = Config.from_args(
        ["run", "--authenticate", ".", "--passwords", ".", "--disable-fallback",
         "--hash-algo", "sha256", "--backend", "simple-dir", packages]
    )  # fmt: skip
    app = pypiserver.setup_routes_from_config(pypiserver.app_from_config(config), config)

    def recording(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] == "POST":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            with open(record, "a", encoding="utf-8") as out:
                out.write(json.dumps(form_fields(environ["CONTENT_TYPE"], body)) + "\n")
        answer: Iterable[bytes] = app(environ, start_response)
        return answer

    make_server("127.0.0.1", port, recording, handler_class=Quiet).serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
