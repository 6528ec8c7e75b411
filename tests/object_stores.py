"""Object stores on loopback for the home's tests: moto's S3 server and Azurite's blob
service (Microsoft's Azure Storage emulator, `npm install -g azurite`; `make azurite`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import formatdate
from pathlib import Path


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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
