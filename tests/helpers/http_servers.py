"""HTTP servers on 127.0.0.1 in a thread: the loaders' downloads are tested against them,
never against the network (conftest.py's `server` and `cut_short_server` fixtures)."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files from a directory, without logging each request."""

    def log_message(self, format: str, *args: object) -> None:
        pass


CUT_SHORT_PAYLOAD = bytes(range(256)) * 64
"""What `CutShortHandler` means to send: 16 KiB, of which it sends half."""


class CutShortHandler(http.server.BaseHTTPRequestHandler):
    """Announces all of CUT_SHORT_PAYLOAD in Content-Length, sends half, and hangs up (HTTP/1.0
    closes the connection when the handler returns), like a transfer cut by the network."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(CUT_SHORT_PAYLOAD)))
        self.end_headers()
        self.wfile.write(CUT_SHORT_PAYLOAD[: len(CUT_SHORT_PAYLOAD) // 2])
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve(handler) -> Iterator[str]:
    """Serve `handler` on 127.0.0.1 from a thread; gives the base URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
