"""The package proxy nodes use, in two halves that never give anyone a route:

- `serve`: an HTTP proxy in the root namespace, listening on a unix socket only, that
  fetches from the Debian archive hosts and nothing else, and caches packages on disk
  (the cache survives between labs);
- `relay`: inside the admin namespace, a TCP listener on the plan's proxy address that
  copies each connection to that unix socket.

python -m cluster_plan.lab.proxy serve SOCKET CACHE_DIR ADMIN_NS
python -m cluster_plan.lab.proxy relay ADDRESS PORT SOCKET ADMIN_NS

Both end by themselves once the lab's admin namespace is gone.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import shutil
import socketserver
import sys
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from cluster_plan.lab.watchdog import exit_process_when_gone, exit_when_gone

ALLOWED_HOSTS = frozenset({"deb.debian.org", "security.debian.org"})
# Files whose name changes whenever their content does: safe to cache forever.
IMMUTABLE = ("/pool/", "/by-hash/")


class ArchiveProxy(BaseHTTPRequestHandler):
    cache: Path
    protocol_version = "HTTP/1.1"

    def address_string(self) -> str:
        return "admin-relay"

    def do_CONNECT(self) -> None:
        self.send_error(403, "the lab proxy only carries plain HTTP to the Debian archive")

    def do_HEAD(self) -> None:
        self._proxy(head=True)

    def do_GET(self) -> None:
        self._proxy(head=False)

    def _refusal(self, url: SplitResult) -> str | None:
        """Why the proxy does not fetch ``url``; None when it does."""
        if url.scheme != "http" or url.hostname not in ALLOWED_HOSTS or url.port not in (None, 80):
            return f"the lab proxy does not fetch {url.hostname or self.path}"
        if "/.." in url.path or "\\" in url.path:  # a node must not steer the cache path
            return "the lab proxy refuses dot-dot paths"
        return None

    def _answer_headers(self, response: http.client.HTTPResponse) -> None:
        """The archive's status and the headers a node's apt needs, passed on."""
        self.send_response(response.status)
        for key in ("Content-Type", "Content-Length", "Last-Modified", "ETag"):
            if response.getheader(key):
                self.send_header(key, response.getheader(key) or "")
        if response.getheader("Content-Length") is None:
            self.send_header("Connection", "close")  # no length: end marks the body
            self.close_connection = True
        self.end_headers()

    def _proxy(self, head: bool) -> None:
        url = urlsplit(self.path)
        refusal = self._refusal(url)
        if refusal is not None or url.hostname is None:
            self.send_error(403, refusal)
            return
        path = url.path + (f"?{url.query}" if url.query else "")
        cached = self.cache / url.hostname / url.path.lstrip("/")
        if any(marker in url.path for marker in IMMUTABLE) and cached.is_file():
            self._send_file(cached, head)
            return
        upstream = self.connect(url.hostname)
        answered = False
        try:
            upstream.request("HEAD" if head else "GET", path, headers={"User-Agent": "lab-proxy"})
            response = upstream.getresponse()
            self._answer_headers(response)
            answered = True
            if head:
                return
            store = response.status == 200 and any(m in url.path for m in IMMUTABLE)
            self._copy(response, cached if store else None)
        except (OSError, http.client.HTTPException) as err:
            if answered:  # mid-body: a second status line would corrupt the stream
                self.close_connection = True
            else:
                self.send_error(502, f"upstream {url.hostname}: {err}")
        finally:
            upstream.close()

    @staticmethod
    def connect(host: str) -> http.client.HTTPConnection:
        """The archive's HTTP connection (a test points it at a local server)."""
        return http.client.HTTPConnection(host, 80, timeout=60)

    def _copy(self, response: http.client.HTTPResponse, cached: Path | None) -> None:
        """Copy the body to the node, and to the cache when it arrived whole.

        http.client's read(n) returns a short body, without an error, when the archive drops
        the connection mid-body; passed on with keep-alive, the node would wait for the
        missing bytes forever (seen: apt hung for good at a cold cache), and a cached copy
        would be truncated for good. So a short body ends the node's connection too (apt
        then retries) and is never cached.
        """
        length = response.getheader("Content-Length")
        expected = int(length) if length and length.isdigit() else None
        # One part file per request: the proxy's threads fetch the same package at once when
        # several nodes install it, and a name shared between them (the process id, once)
        # interleaved their writes into a cached package of the right size and wrong bytes.
        partial = cached.with_name(f"{cached.name}.{uuid.uuid4().hex}.part") if cached else None
        sink = None
        if partial is not None:
            partial.parent.mkdir(parents=True, exist_ok=True)
            sink = open(partial, "wb")  # noqa: SIM115 (closed below)
        copied = 0
        whole = False
        try:
            while chunk := response.read(65536):
                self.wfile.write(chunk)
                if sink:
                    sink.write(chunk)
                copied += len(chunk)
            whole = expected is None or copied == expected
        finally:
            if sink and partial and cached:
                sink.close()
                if whole:
                    os.replace(partial, cached)
                else:
                    partial.unlink(missing_ok=True)
        if not whole:
            self.close_connection = True

    def _send_file(self, cached: Path, head: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(cached.stat().st_size))
        self.end_headers()
        if not head:
            with open(cached, "rb") as src:
                shutil.copyfileobj(src, self.wfile)


class UnixProxyServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serve(socket_path: str, cache: str, admin_ns: str) -> None:
    exit_process_when_gone(admin_ns, inside=False)
    Path(socket_path).unlink(missing_ok=True)
    handler = type("Handler", (ArchiveProxy,), {"cache": Path(cache)})
    with UnixProxyServer(socket_path, handler) as server:
        os.chmod(socket_path, 0o600)
        server.serve_forever()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _relay(address: str, port: int, socket_path: str, admin_ns: str) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(handle, address, port)
    async with server:
        await exit_when_gone(admin_ns, inside=True)


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "serve":
        serve(argv[1], argv[2], argv[3])
    elif len(argv) == 5 and argv[0] == "relay":
        asyncio.run(_relay(argv[1], int(argv[2]), argv[3], argv[4]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
