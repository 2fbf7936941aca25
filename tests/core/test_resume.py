"""The engine's plain-HTTP transfer against servers that do not answer a ``Range`` as asked: a kept
partial is never trusted past what the answer proves (tests/reliability/test_resume.py has the cuts)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_hfsnapshot.core import _hf_compat
from pytest_hfsnapshot.core.cache.layout import partial_blob
from pytest_hfsnapshot.core.engine import resume

DATA = bytes(range(256)) * 4096  # 1 MiB
ETAG = "a" * 64
FILE = ("model.safetensors", "org/x@main")


class Server:
    """A file server on 127.0.0.1 that answers a ``Range`` in one of three ways (``mode``): as asked
    (206), with the whole file (200, as a CDN that ignores it), or with another range (206)."""

    def __init__(self) -> None:
        self.mode = "honour"
        self.ranges: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                asked = self.headers.get("Range")
                outer.ranges.append(asked)
                start = int(asked.removeprefix("bytes=").rstrip("-")) if asked else 0
                if asked is None or outer.mode == "ignore":
                    status, first = 200, 0
                else:
                    status, first = 206, (0 if outer.mode == "other" else start)
                body = DATA[first:]
                self.send_response(status)
                if status == 206:
                    self.send_header("Content-Range", f"bytes {first}-{len(DATA) - 1}/{len(DATA)}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/file"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Server]:
    served = Server()
    yield served
    served.httpd.shutdown()
    served.httpd.server_close()


def transfer(server: Server, blobs: Path) -> Path:
    """One transfer of the file into the client's kind of ``.incomplete`` file; that file."""
    out = blobs / f"{ETAG}.0123abcd.incomplete"
    with out.open("wb") as f:
        resume.Transfer(server.url, f, out, partial_blob(blobs, ETAG), {}, len(DATA), FILE).run()
    return out


@pytest.mark.parametrize("mode", ["ignore", "other"])
def test_an_answer_that_is_not_the_range_asked_starts_over(server: Server, tmp_path: Path, mode: str) -> None:
    server.mode = mode
    partial_blob(tmp_path, ETAG).write_bytes(b"\0" * 1000)  # not the file's first bytes

    out = transfer(server, tmp_path)

    assert out.read_bytes() == DATA
    assert not partial_blob(tmp_path, ETAG).exists()
    # Asked from the partial's end; then, where the answer was another range, for the whole file.
    assert server.ranges == (["bytes=1000-"] if mode == "ignore" else ["bytes=1000-", None])


def test_a_partial_as_long_as_the_file_is_handed_on_without_a_request(server: Server, tmp_path: Path) -> None:
    partial_blob(tmp_path, ETAG).write_bytes(DATA)

    assert transfer(server, tmp_path).read_bytes() == DATA  # its hash is checked by the engine, as any file's
    assert server.ranges == []


@pytest.mark.parametrize("kind", ["link", "folder"])
def test_a_partial_that_is_no_file_is_not_followed(server: Server, tmp_path: Path, kind: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(DATA[:1000])
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    if kind == "link":
        os.symlink(elsewhere, partial_blob(blobs, ETAG))
    else:
        partial_blob(blobs, ETAG).mkdir()

    assert transfer(server, blobs).read_bytes() == DATA
    assert server.ranges == [None]
    assert elsewhere.read_bytes() == DATA[:1000]
    assert (
        os.path.isdir(partial_blob(blobs, ETAG)) if kind == "folder" else not os.path.lexists(partial_blob(blobs, ETAG))
    )


def test_the_clients_function_is_back_once_no_transfer_is_inside() -> None:
    import huggingface_hub.file_download as file_download

    original = getattr(file_download, _hf_compat.HTTP_GET)
    with resume.transfers(*FILE):
        with resume.transfers(*FILE):
            assert getattr(file_download, _hf_compat.HTTP_GET) is not original
        assert getattr(file_download, _hf_compat.HTTP_GET) is not original
    assert getattr(file_download, _hf_compat.HTTP_GET) is original


def test_a_file_too_large_for_plain_http_is_left_to_the_client(tmp_path: Path) -> None:
    import huggingface_hub.constants as constants
    import huggingface_hub.file_download as file_download

    out = tmp_path / f"{ETAG}.0123abcd.incomplete"
    with resume.transfers(*FILE), out.open("wb") as f, pytest.raises(ValueError, match="too large"):
        getattr(file_download, _hf_compat.HTTP_GET)(
            "http://127.0.0.1:9/file", f, expected_size=constants.MAX_HTTP_DOWNLOAD_SIZE + 1
        )
