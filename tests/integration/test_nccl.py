"""`release nccl --check` against a real simple index on 127.0.0.1 (what uv and pip do with
the files is tests/full/test_nccl_installers.py)."""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from release.cli import main
from tests.integration.indexes import serve

REPO = Path(__file__).resolve().parents[2]


class _Index(http.server.BaseHTTPRequestHandler):
    pages: ClassVar[dict[str, str]] = {}

    def do_GET(self) -> None:
        page = self.pages.get(self.path)
        if page is None:
            self.send_error(404)
            return
        body = page.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def simple_index() -> Iterator[str]:
    """A PEP 503 index on 127.0.0.1: cu12 has 2.26.2 and 2.30.7, cu13 only 2.26.2."""
    files = "".join(
        f'<a href="../../f/{n}#sha256=00">{n}</a>\n'
        for n in (
            "nvidia_nccl_cu12-2.26.2-py3-none-manylinux_2_18_x86_64.whl",
            "nvidia_nccl_cu12-2.30.7-py3-none-manylinux_2_18_x86_64.whl",
        )
    )
    old_cu13 = '<a href="../../f/x#sha256=00">nvidia_nccl_cu13-2.26.2-py3-none-any.whl</a>'
    _Index.pages = {
        "/simple/nvidia-nccl-cu12/": f"<html><body>{files}</body></html>",
        "/simple/nvidia-nccl-cu13/": f"<html><body>{old_cu13}</body></html>",
    }
    with serve(_Index) as url:
        yield url + "simple/"


def nccl_check(out: Path, index_url: str, *extra: str) -> int:
    return main(
        [
            "nccl",
            "--matrix",
            str(REPO / "matrix.yaml"),
            "--out",
            str(out),
            "--check",
            "--index-url",
            index_url,
            *extra,
        ]
    )


def test_check_fails_clearly_for_a_major_without_that_version(
    simple_index: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = nccl_check(tmp_path / "o", simple_index)
    err = capsys.readouterr().err
    assert code == 2
    assert "nvidia-nccl-cu13==2.30.7 does not exist on" in err
    assert "newest there: 2.26.2" in err
    assert "nvidia-nccl-cu12" not in err
    assert not (tmp_path / "o").exists(), "nothing is written when the check fails"


def test_check_passes_when_the_version_exists(simple_index: str, tmp_path: Path) -> None:
    code = nccl_check(tmp_path, simple_index, "--cuda", "12.9")
    assert code == 0
    assert (tmp_path / "cu12.txt").exists()
    assert not (tmp_path / "cu13.txt").exists()


def test_check_names_a_package_the_index_lacks(
    simple_index: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = nccl_check(tmp_path, simple_index.replace("/simple/", "/other/"))
    assert code == 2
    assert "nvidia-nccl-cu12 is not on" in capsys.readouterr().err
