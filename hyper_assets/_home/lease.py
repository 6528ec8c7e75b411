"""A lease on an object-store home: writers in different pods take turns.

The lease is one small object, `lease.json`, written only with the store's conditional
puts (obstore: create-if-absent, and update-if-the-ETag-matches):

- acquire: create it, or take it over by an update conditional on the ETag that was
  seen, once it is released or has stayed unchanged for its `seconds`;
- hold: a heartbeat thread renews it (a conditional update) every third of `seconds`;
- release: a conditional update marking it released (obstore has no conditional delete;
  a released lease is taken over at once).

Each write goes through `stores.put`, which gives a local directory the conditional update
obstore lacks there.

Expiry needs no shared clock: a waiter counts `seconds` on its own monotonic clock from
when it first saw the object's current ETag, and a holder counts them from before its
last successful renewal was sent, so the holder always thinks it expired first. A
holder whose renewal fails has lost the lease: `renew()` raises `LeaseLostError`, and a
commit renews first (the fence).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, PreconditionError
from obstore.store import ObjectStore

from hyper_assets._base.saved import Fields, SavedFormat
from hyper_assets._home.generations import store_errors
from hyper_assets._home.stores import put
from hyper_assets.errors import DatabaseLockedError, HomeStoreError, LeaseLostError

LEASE = "lease.json"
_log = logging.getLogger(__name__)
FORMAT = 1


@dataclass(frozen=True)
class LeaseRecord:
    """What `lease.json` holds: who holds it, for how long, and whether it was let go."""

    id: str
    holder: str
    seconds: float
    released: bool = False
    renewals: int = 0

    def to_bytes(self) -> bytes:
        return json.dumps(RECORD.to_json(self)).encode()

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "holder": self.holder,
            "seconds": self.seconds,
            "released": self.released,
            "renewals": self.renewals,
        }

    @classmethod
    def from_json(cls, f: Fields) -> LeaseRecord:
        return cls(
            id=f.take("id", str),
            holder=f.take("holder", str),
            seconds=f.take("seconds", float),
            released=f.take("released", bool),
            renewals=f.take("renewals", int),
        )


#: `lease.json`; version 1 spelled its version `format`.
RECORD = SavedFormat(
    FORMAT,
    LeaseRecord.from_json,
    LeaseRecord.to_json,
    "If no write to the home runs, delete it: the next write takes the lease anew.",
    older_keys=("format",),
)


class Lease:
    """One writer's hold on a home; use as a context manager around the write."""

    def __init__(
        self, store: ObjectStore, where: str, seconds: float, timeout_seconds: float
    ) -> None:
        self.store, self.where = store, where
        self.seconds, self.timeout_seconds = seconds, timeout_seconds
        self.record = LeaseRecord(
            uuid.uuid4().hex, f"{socket.gethostname()}~{os.getpid()}", seconds
        )
        self._etag: str | None = None
        self._held_until = 0.0
        self._guard = threading.RLock()  # one renewal at a time: heartbeat or commit
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    @property
    def id(self) -> str:
        return self.record.id

    def __enter__(self) -> Lease:
        self.acquire()
        self._heartbeat = threading.Thread(target=self._beat, daemon=True, name="hyper-lease")
        self._heartbeat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._heartbeat:
            self._heartbeat.join()
        self.release()

    def acquire(self) -> None:
        """Takes the lease, waiting up to `timeout_seconds` for its holder."""
        deadline = time.monotonic() + self.timeout_seconds
        seen: tuple[str | None, float] = (None, 0.0)  # (ETag, when first seen)
        delay = 0.1
        while True:
            started = time.monotonic()
            try:
                with store_errors(self.where, missing=False):
                    found = obstore.get(self.store, LEASE)
            except FileNotFoundError:  # obstore raises it for a missing object
                if self._put("create", started):
                    return
                continue
            etag = found.meta["e_tag"]
            current = RECORD.from_text(bytes(found.bytes()), f"{self.where}/{LEASE}")
            if etag != seen[0]:
                seen = (etag, started)
            expired = time.monotonic() - seen[1] > current.seconds
            if (current.released or expired) and self._put({"e_tag": etag}, started):
                return
            if time.monotonic() + delay > deadline:
                raise DatabaseLockedError(
                    f"{self.where} is leased by {current.holder} and stayed so for "
                    f"{self.timeout_seconds:g} s. If that writer was killed, its lease "
                    f"expires {current.seconds:g} s after its last renewal; else wait for "
                    "it, or raise HyperResource(lock_timeout_seconds=...)."
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _put(self, mode: Any, started: float) -> bool:
        """One conditional write of this lease; False when another writer won the race."""
        with store_errors(self.where):
            try:
                written = put(self.store, LEASE, self.record.to_bytes(), mode)
            except (AlreadyExistsError, PreconditionError):
                return False
        with self._guard:
            self._etag = written["e_tag"]
            self._held_until = started + self.seconds
        return True

    def renew(self) -> None:
        """Extends the lease; `LeaseLostError` if it expired or another writer took it."""
        with self._guard:
            held = time.monotonic() < self._held_until
            self.record = LeaseRecord(
                self.record.id, self.record.holder, self.seconds, renewals=self.record.renewals + 1
            )
            if held and self._put({"e_tag": self._etag}, time.monotonic()):
                return
            raise LeaseLostError(
                f"The lease of {self.where} expired while this write ran (it was held "
                f"{self.seconds:g} s without renewal, or another writer took it); nothing of "
                "this write was committed. Run it again; if writes stall this long, raise "
                "the lease's seconds."
            )

    def release(self) -> None:
        """Lets go of the lease, unless another writer has taken it meanwhile."""
        if self._etag is None:
            return
        released = LeaseRecord(self.record.id, self.record.holder, self.seconds, released=True)
        try:
            put(self.store, LEASE, released.to_bytes(), {"e_tag": self._etag})
        except PreconditionError:
            pass  # expired and taken over: not ours to release
        except (BaseError, OSError, HomeStoreError) as error:  # what it guarded is done
            _log.warning(
                "Could not release the lease of %s (%s); it expires after %g s.",
                self.where,
                str(error).split("\n")[0],
                self.seconds,
            )

    def _beat(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                self.renew()
            except LeaseLostError:
                return  # the commit's own renewal reports it
