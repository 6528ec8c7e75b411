"""Object stores on loopback for the home's tests: moto's S3 server, Azurite's blob
service (Microsoft's Azure Storage emulator, `npm install -g azurite`; `make azurite`),
and a proxy in front of a store that plays the network's faults."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import http.server
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.utils import formatdate
from pathlib import Path

from helpers import free_port


@contextmanager
def moto_server() -> Iterator[tuple[str, int]]:
    """moto's S3 server on a free loopback port; yields its (host, port)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield server.get_host_and_port()
    finally:
        server.stop()


#: Azurite's well-known development account (public: it is in Microsoft's docs).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def azurite_version() -> str | None:
    """The installed Azurite's version; None when it is not installed."""
    if not shutil.which("azurite-blob"):
        return None
    found = subprocess.run(
        ["azurite-blob", "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    return found.stdout.strip() or None


@contextmanager
def azurite(directory: Path) -> Iterator[str]:
    """Azurite's blob service on a free loopback port, in memory, sending no telemetry;
    yields its endpoint for the development account."""
    port = free_port()
    process = subprocess.Popen(
        ["azurite-blob", "--blobHost", "127.0.0.1", "--blobPort", str(port),
         "--inMemoryPersistence", "--disableTelemetry", "--silent"],
        cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("Azurite did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
    finally:
        process.terminate()
        process.wait(30)


def create_container(endpoint: str, name: str) -> None:
    """Creates a blob container (Create Container, signed with the account's Shared Key)."""
    headers = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": "2021-08-06"}
    canonical = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
    resource = f"/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{name}\nrestype:container"
    signed = "PUT\n" + "\n" * 11 + canonical + resource  # the 11 standard headers, all empty
    key = base64.b64decode(AZURITE_KEY)
    signature = base64.b64encode(hmac.new(key, signed.encode(), hashlib.sha256).digest()).decode()
    request = urllib.request.Request(
        f"{endpoint}/{name}?restype=container",
        method="PUT",
        headers={
            **headers,
            "Authorization": f"SharedKey {AZURITE_ACCOUNT}:{signature}",
            "Content-Length": "0",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        assert reply.status == 201, reply.status


class StoreProxy:
    """An HTTP proxy on loopback in front of a store's endpoint (moto's): it relays every
    request and its reply, but for the first request each fault a test armed matches,
    on which it plays that fault. `reached` is set when such a request arrives;
    `requests` lists the (method, path) of every request, in the order they arrived;
    `most_at_once` is how many requests that `slow_down` matches it held at once."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = urllib.parse.urlsplit(endpoint)
        self.reached, self.healed = threading.Event(), threading.Event()
        self.requests: list[tuple[str, str]] = []
        self._armed: list[tuple[Callable[[str, str], bool], str]] = []
        self._partitioned = threading.Event()
        self._guard = threading.Lock()
        self._slow: tuple[Callable[[str, str], bool], float] | None = None
        self._in_flight = self.most_at_once = 0
        proxy = self

        class Relay(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_request(self) -> None:
                proxy._handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_request

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> StoreProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.heal()
        self._server.shutdown()
        self._server.server_close()

    def stall(self, matches: Callable[[str, str], bool]) -> None:
        """The first request `matches(method, path)` waits until `heal()`, then is relayed."""
        self._armed.append((matches, "stall"))

    def lose_reply(self, matches: Callable[[str, str], bool], *, partition: bool = False) -> None:
        """The first matching request reaches the store, but its reply is lost (the
        connection closes). With `partition`, the reply is lost only at `heal()`, and
        until then every later request waits as well: the store is out of reach."""
        self._armed.append((matches, "partition" if partition else "lose_reply"))

    def refuse(self, matches: Callable[[str, str], bool]) -> None:
        """The first matching request never reaches the store: it is answered 403 (a
        client error, which no client retries)."""
        self._armed.append((matches, "refuse"))

    def slow_down(self, matches: Callable[[str, str], bool], seconds: float) -> None:
        """Every request `matches(method, path)` is relayed `seconds` late, so that those a
        client sends at once are in the proxy together (`most_at_once` counts them)."""
        self._slow = (matches, seconds)

    def heal(self) -> None:
        """Lets stalled requests and a partition's requests through."""
        self.healed.set()

    def _fate(self, method: str, path: str) -> str:
        with self._guard:
            armed = next((a for a in self._armed if a[0](method, path)), None)
            if armed is None:
                return "relay"
            self._armed.remove(armed)
        self.reached.set()
        return armed[1]

    def _handle(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        slow = self._slow
        if slow is None or not slow[0](handler.command, handler.path):
            self._relay(handler)
            return
        with self._guard:
            self._in_flight += 1
            self.most_at_once = max(self.most_at_once, self._in_flight)
        try:
            time.sleep(slow[1])
            self._relay(handler)
        finally:
            with self._guard:
                self._in_flight -= 1

    def _relay(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        if self._partitioned.is_set():
            self.healed.wait(120)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length)
        self.requests.append((handler.command, handler.path))
        fate = self._fate(handler.command, handler.path)
        if fate == "stall":
            self.healed.wait(120)
        if fate == "refuse":
            denied = b"<Error><Code>AccessDenied</Code><Message>Refused</Message></Error>"
            handler.send_response_only(403, "Forbidden")
            handler.send_header("Content-Type", "application/xml")
            handler.send_header("Content-Length", str(len(denied)))
            handler.end_headers()
            handler.wfile.write(denied)
            return
        upstream = http.client.HTTPConnection(
            self.endpoint.hostname, self.endpoint.port, timeout=60
        )
        try:
            upstream.putrequest(
                handler.command, handler.path, skip_host=True, skip_accept_encoding=True
            )
            for name, value in handler.headers.items():
                upstream.putheader(name, value)
            upstream.endheaders(body)
            reply = upstream.getresponse()
            content = reply.read()
        finally:
            upstream.close()
        if fate == "partition":
            self._partitioned.set()
            self.healed.wait(120)
        if fate in ("lose_reply", "partition"):
            handler.close_connection = True
            return
        handler.send_response_only(reply.status, reply.reason)
        for name, value in reply.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                handler.send_header(name, value)
        size = reply.getheader("Content-Length") if handler.command == "HEAD" else None
        handler.send_header("Content-Length", size or str(len(content)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(content)
