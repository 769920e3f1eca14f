"""Where downloaded datasets live, and a download that is verified and atomic."""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from trainscale.errors import DataError

log = logging.getLogger(__name__)

CACHE_ENV = "TRAINSCALE_CACHE_DIR"
_CHUNK_BYTES = 1 << 20


def cache_dir() -> Path:
    """The trainscale cache directory (not created here).

    ``$TRAINSCALE_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/trainscale``, else
    ``~/.cache/trainscale``.
    """
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec says relative values are invalid and must be ignored.
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "trainscale"
    return Path.home() / ".cache" / "trainscale"


def download(
    url: str,
    dest: Path | str,
    sha256: str | None = None,
    md5: str | None = None,
    timeout_s: float = 30,
) -> Path:
    """Download ``url`` to ``dest``, verifying the given checksum(s) before it appears.

    The body is streamed to a temporary file in ``dest``'s directory and renamed onto
    ``dest`` only after it has the length the server announced (``Content-Length``, when
    there is one) and the checksums match, so ``dest`` is either absent or complete, even
    if the connection drops or the process is killed half-way.

    Args:
        url: what to fetch (any scheme urllib supports; http and https in practice).
        dest: the final file path; its parent directories are created.
        sha256: expected SHA-256 hex digest, or None to skip that check.
        md5: expected MD5 hex digest, or None to skip that check.
        timeout_s: socket timeout for connecting and for each read.

    Returns:
        ``dest`` as a Path.

    Raises:
        DataError: the download failed or was cut short, a checksum did not match, or
            ``dest``'s directory cannot be written.
    """
    dest = Path(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    except OSError as exc:
        raise DataError(
            f"cannot write to {dest.parent} ({exc.strerror or exc}); make it writable or set "
            f"{CACHE_ENV} to a writable directory"
        ) from None
    tmp = Path(tmp_name)
    hashers = {"sha256": hashlib.sha256(), "md5": hashlib.md5(usedforsecurity=False)}
    try:
        with os.fdopen(fd, "wb") as out:
            log.info("downloading %s -> %s", url, dest)
            with _open_url(url, timeout_s, dest) as resp:
                announced = _content_length(resp)
                received = 0
                while chunk := _read_chunk(resp, url, dest):
                    try:
                        out.write(chunk)
                    except OSError as exc:
                        raise DataError(
                            f"cannot write {dest} ({exc.strerror or exc}); free some space or "
                            f"set {CACHE_ENV} to another directory"
                        ) from None
                    received += len(chunk)
                    for h in hashers.values():
                        h.update(chunk)
        if announced is not None and received != announced:
            # Checked before the digests: with a checksum the cause is then named plainly,
            # and without one this is the only sign of a transfer cut short.
            raise DataError(
                f"download of {url} was cut short: received {received} of the {announced} "
                "bytes the server announced; check the network and retry"
            )
        for name, expected in (("sha256", sha256), ("md5", md5)):
            actual = hashers[name].hexdigest()
            if expected is not None and actual != expected.lower():
                raise DataError(
                    f"checksum mismatch for {url}: expected {name} {expected}, got {actual}; "
                    "the mirror may be serving a damaged or changed file, try another source"
                )
        os.replace(tmp, dest)
    except BaseException:
        # Also on KeyboardInterrupt: never leave a stray .part file behind.
        tmp.unlink(missing_ok=True)
        raise
    return dest


_NETWORK_ERRORS = (urllib.error.URLError, http.client.HTTPException, OSError)


def _network_error(url: str, dest: Path, exc: BaseException) -> DataError:
    # HTTPError's str carries the status code; URLError's reason is the socket error.
    is_http = isinstance(exc, urllib.error.HTTPError)
    reason = exc if is_http else getattr(exc, "reason", None) or exc
    return DataError(
        f"could not download {url} ({reason}); check the network, or fetch the file by hand "
        f"into {dest.parent}"
    )


def _open_url(url: str, timeout_s: float, dest: Path) -> http.client.HTTPResponse:
    try:
        return urllib.request.urlopen(url, timeout=timeout_s)
    except _NETWORK_ERRORS as exc:
        raise _network_error(url, dest, exc) from None


def _content_length(resp: http.client.HTTPResponse) -> int | None:
    """The body size the server announced, or None (no header, a chunked body, a bad value)."""
    value = resp.headers.get("Content-Length")
    if value is None or resp.headers.get("Transfer-Encoding"):
        return None
    try:
        length = int(value.strip())
    except ValueError:
        return None
    return length if length >= 0 else None


def _read_chunk(resp: http.client.HTTPResponse, url: str, dest: Path) -> bytes:
    # http.client's read(amt) returns b"" when the connection closes early, without raising
    # IncompleteRead: download() compares the byte count with Content-Length itself.
    try:
        return resp.read(_CHUNK_BYTES)
    except _NETWORK_ERRORS as exc:
        raise _network_error(url, dest, exc) from None
