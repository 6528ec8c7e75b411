"""Fault injection, so tests can rehearse what a real server does on a bad day.

emulator.faults.fail_requests("PATCH", r"/data$", status=429, retry_after=3)
emulator.faults.drop_after_accept("PATCH", r"/data$")   # applied, but no reply
emulator.faults.fail_next_job("disk full")
emulator.faults.expire_sessions_before("PATCH", r"/data$")  # the token expires mid-publish
emulator.faults.pause_jobs(); ...; emulator.faults.resume_jobs()
held = emulator.faults.pause_requests("POST", r"/query-datasource$"); held.wait(); ...;
emulator.faults.resume_requests()  # a request held before it is handled
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass


@dataclass
class RequestFault:
    """Answer `count` requests matching `method` and the `path` regex with `status`."""

    method: str
    path: re.Pattern[str]
    count: int
    status: int = 503
    retry_after: int | None = None
    skip: int = 0  # matching requests let through first

    def matches(self, method: str, path: str) -> bool:
        return self.count > 0 and self.method in (method, "*") and bool(self.path.search(path))


class Faults:
    """The faults armed on one emulator; every method is thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: list[RequestFault] = []
        self._drops: list[RequestFault] = []
        self._expiries: list[RequestFault] = []
        self._job_failures: list[str] = []
        self._jobs_running = threading.Event()
        self._jobs_running.set()
        self._hold_started = False  # pause jobs once started rather than while queued
        self._pauses: list[RequestFault] = []
        self._requests_running = threading.Event()
        self._requests_running.set()
        self._request_held = threading.Event()

    def fail_requests(
        self,
        method: str,
        path_pattern: str,
        *,
        status: int = 503,
        count: int = 1,
        retry_after: int | None = None,
        skip: int = 0,
    ) -> None:
        """Fail `count` matching requests, after letting `skip` through, before they are
        handled (500/503/429)."""
        fault = RequestFault(
            method.upper(), _pattern(path_pattern), count, status, retry_after, skip
        )
        with self._lock:
            self._failures.append(fault)

    def drop_after_accept(self, method: str, path_pattern: str, *, count: int = 1) -> None:
        """Handle the next `count` matching requests fully, then close without replying."""
        with self._lock:
            self._drops.append(RequestFault(method.upper(), _pattern(path_pattern), count))

    def expire_sessions_before(self, method: str, path_pattern: str, *, count: int = 1) -> None:
        """End every session just before the next `count` matching requests (they get 401)."""
        with self._lock:
            self._expiries.append(RequestFault(method.upper(), _pattern(path_pattern), count))

    def pause_requests(self, method: str, path_pattern: str, *, count: int = 1) -> threading.Event:
        """Hold the next `count` matching requests, before they are handled, until
        `resume_requests`; the event returned is set once one is held."""
        with self._lock:
            self._pauses.append(RequestFault(method.upper(), _pattern(path_pattern), count))
            self._request_held = threading.Event()
            self._requests_running.clear()
            return self._request_held

    def resume_requests(self) -> None:
        """Let the held requests (and the next matching ones) be handled."""
        with self._lock:
            self._pauses.clear()
            self._requests_running.set()

    def hold_if_paused(self, method: str, path: str) -> None:
        """Wait until `resume_requests` if a `pause_requests` matches this request."""
        if self._take(self._pauses, method, path) is not None:
            self._request_held.set()
            self._requests_running.wait()

    def clear(self) -> None:
        """Disarm every request fault not yet taken."""
        with self._lock:
            self._failures.clear()
            self._drops.clear()
            self._expiries.clear()

    def fail_next_job(self, message: str = "Injected job failure.") -> None:
        """Make the next job (update or publish) fail with `message` in its notes, changing nothing.

        With `message=""` the job fails without notes, as real servers' jobs sometimes do.
        """
        with self._lock:
            self._job_failures.append(message)

    def pause_jobs(self, *, once_started: bool = False) -> None:
        """Keep queued jobs waiting (to observe or cancel them) until `resume_jobs`; with
        `once_started`, let a job start and hold it at progress 0, as in progress."""
        self._hold_started = once_started
        self._jobs_running.clear()

    def resume_jobs(self) -> None:
        self._jobs_running.set()

    def take_failure(self, method: str, path: str) -> RequestFault | None:
        return self._take(self._failures, method, path)

    def take_drop(self, method: str, path: str) -> bool:
        return self._take(self._drops, method, path) is not None

    def take_expiry(self, method: str, path: str) -> bool:
        return self._take(self._expiries, method, path) is not None

    def take_job_failure(self) -> str | None:
        with self._lock:
            return self._job_failures.pop(0) if self._job_failures else None

    def wait_until_jobs_may_run(self, timeout: float, *, started: bool = False) -> bool:
        """Whether a queued job may start (a `started` one go on), waiting up to `timeout`."""
        if started != self._hold_started:
            return True
        return self._jobs_running.wait(timeout)

    def _take(self, faults: list[RequestFault], method: str, path: str) -> RequestFault | None:
        with self._lock:
            for fault in faults:
                if fault.matches(method, path) and fault.skip:
                    fault.skip -= 1
                elif fault.matches(method, path):
                    fault.count -= 1
                    return fault
        return None


def _pattern(path_pattern: str) -> re.Pattern[str]:
    return re.compile(path_pattern, re.IGNORECASE)
