"""`Transport`: one HTTP request to Tableau, retried while repeating it is safe.

The bottom layer of the client: it knows httpx and the retry policy, not Tableau's
replies. httpx's errors end here: a `server_url` httpx cannot send to is a
`ConfigurationError` when the transport is made; no answer (network, TLS, timeouts) is a
`TableauConnectionError`; a reply whose body does not decode (its `Content-Encoding`
lies) an `UnexpectedReplyError`; a request URL httpx refuses a `TableauError`; a request
that breaks HTTP (a header value with a line break) a `TableauConnectionError` that was
neither sent nor repeated. An HTTP
reply, error or not, goes up to `replies.parse`. (httpx's other errors cannot arise here:
redirects are not followed, and cookies and streams are not used so as to raise.)

What is retried depends on whether repeating the request is safe:

- every request: connection errors before it was sent, 429 and 503 (the server refused it);
- requests safe to repeat, also errors after sending and other 5xx: GETs, signing in,
  starting an upload (a repeat leaves an unused session behind) and the data PATCH (the
  server runs a `RequestID` once and answers a repeat with the original job);
- an upload chunk is appended, so it is not repeated after an unclear failure: the upload
  starts over in a new session. A publish POST is not repeated either: its error says it
  may have been applied (`maybe_applied`) and to publish again with `overwrite=True`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from hyper_assets.errors import (
    ConfigurationError,
    TableauConnectionError,
    TableauError,
    TableauRequestError,
    UnexpectedReplyError,
)
from hyper_assets.tableau._rest import defaults

log = logging.getLogger(__name__)

UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, bounded in retries and in total seconds."""

    max_retries: int = defaults.MAX_RETRIES
    initial_delay: float = defaults.RETRY_INITIAL_DELAY_SECONDS
    max_delay: float = defaults.RETRY_MAX_DELAY_SECONDS
    max_total: float = defaults.RETRY_MAX_TOTAL_SECONDS

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds before retry number `retry` (from 0); the server's Retry-After wins."""
        if retry_after is not None:
            return retry_after
        ceiling = min(self.max_delay, self.initial_delay * 2**retry)
        return ceiling / 2 + random.uniform(0, ceiling / 2)


@dataclass(frozen=True)
class HttpSettings:
    """Where the server is and how long to wait for it."""

    server_url: str
    verify_tls: bool = defaults.VERIFY_TLS
    connect_timeout_seconds: float = defaults.CONNECT_TIMEOUT_SECONDS
    timeout_seconds: float = defaults.TIMEOUT_SECONDS


class Transport:
    """Sends one HTTP request and retries it while that is safe (see the module docstring)."""

    def __init__(self, http: HttpSettings, policy: RetryPolicy) -> None:
        self.http = httpx.Client(
            base_url=checked_server_url(http.server_url),
            verify=http.verify_tls,
            timeout=httpx.Timeout(http.timeout_seconds, connect=http.connect_timeout_seconds),
            headers={"Accept": "application/json"},
        )
        self.policy = policy

    def send(
        self,
        method: str,
        url: str,
        *,
        repeatable: bool,
        stream: bool = False,
        fresh_json: Callable[[], Any] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """The reply; with `stream`, its body is unread, and the caller closes the reply.
        `fresh_json` makes the JSON body anew for every attempt (a sign-in's JWT is good
        for one)."""
        started, retry = time.monotonic(), 0
        while True:
            try:
                fresh = {"json": fresh_json()} if fresh_json else {}
                request = self._request(method, url, **fresh, **kwargs)
                response = self.http.send(request, stream=True)
                if not stream:
                    _read(response, f"{method} {url}")
            except httpx.LocalProtocolError as err:
                raise TableauConnectionError(
                    f"Tableau server {self._host_port()}: {method} {url} cannot be sent as "
                    f"HTTP ({err}); nothing was sent, and it was not repeated, as it would "
                    "fail again. A header comes from the server's reply (the sign-in token) "
                    "or from the settings: check them.",
                    maybe_applied=False,
                ) from err
            except httpx.TransportError as err:
                unsent = isinstance(err, UNSENT)
                what = f"{method} {url} failed: {err!r}"
                if not (unsent or repeatable) or not self._wait(retry, started, None, what):
                    advice = (
                        "Check server_url, the network and the TLS settings."
                        if unsent
                        else "It was sent and may have been applied, so it was not repeated."
                    )
                    raise TableauConnectionError(
                        f"Tableau server {self._host_port()}: {what} ({retry + 1} attempts). "
                        + advice,
                        maybe_applied=not unsent,
                    ) from err
            else:
                status = response.status_code
                retryable = status in (429, 503) or (repeatable and status >= 500)
                what = f"{method} {url} answered {status}"
                if not retryable or not self._wait(retry, started, _retry_after(response), what):
                    return response
                response.close()
            retry += 1

    @contextmanager
    def reading(self, response: httpx.Response, what: str) -> Iterator[None]:
        """Reading the body of `response`, a streamed reply (`send(stream=True)`): httpx's
        errors in it are `TableauConnectionError`s, a body that does not decode an
        `UnexpectedReplyError`. Nothing is retried: the caller had the reply."""
        try:
            yield
        except httpx.DecodingError as err:
            raise _undecodable(response, what, err) from err
        except httpx.TransportError as err:
            raise TableauConnectionError(
                f"Tableau server {self._host_port()}: {what} failed while reading the reply: "
                f"{err!r}. Try again.",
                maybe_applied=False,
            ) from err

    def close(self) -> None:
        self.http.close()

    def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Request:
        """The request to send; a `TableauError` when httpx refuses its URL (too long, say)."""
        try:
            return self.http.build_request(method, url, **kwargs)
        except httpx.InvalidURL as err:
            raise TableauError(
                f"Tableau server {self._host_port()}: {method} {url[:200]!r} is not a URL "
                f"httpx can send ({err}); nothing was sent."
            ) from err

    def _host_port(self) -> str:
        """`host:port` of the server, the port implied by the scheme when the URL has none."""
        url = self.http.base_url
        port = url.port or {"https": 443, "http": 80}.get(url.scheme)
        return f"{url.host}:{port}"

    def _wait(self, retry: int, started: float, retry_after: float | None, what: str) -> bool:
        """Sleep before the next retry; False when the policy allows no more."""
        delay = self.policy.delay(retry, retry_after)
        elapsed = time.monotonic() - started
        if retry >= self.policy.max_retries or elapsed + delay > self.policy.max_total:
            return False
        log.warning("Tableau %s; retry %d in %.2f s", what, retry + 1, delay)
        time.sleep(delay)
        return True


def checked_server_url(server_url: str) -> httpx.URL:
    """`server_url` as httpx reads it; a `ConfigurationError` saying what is wrong when it
    is not an http(s) URL naming a host (the URL is quoted without any user or password)."""
    try:
        url = httpx.URL(server_url)
    except httpx.InvalidURL as err:
        raise _bad_server_url("", f"httpx cannot read it: {err}") from err
    shown = str(url.copy_with(userinfo=b"")) if url.userinfo else server_url
    if url.scheme not in ("http", "https"):
        raise _bad_server_url(shown, "it does not start with http:// or https://")
    if not url.host:
        raise _bad_server_url(shown, "it names no host")
    if url.port is not None and not 0 < url.port < 65536:
        raise _bad_server_url(shown, f"its port {url.port} is not one of 1 to 65535")
    return url


def _bad_server_url(shown: str, problem: str) -> ConfigurationError:
    quoted = f" {shown!r}" if shown else ""
    return ConfigurationError(
        f"Tableau server_url{quoted}: {problem}. Give the server's base URL, e.g. "
        "https://tableau.example.com."
    )


def maybe_applied(err: TableauConnectionError | TableauRequestError) -> bool:
    """Whether a request that failed so may have been applied all the same."""
    if isinstance(err, TableauConnectionError):
        return err.maybe_applied
    return err.status >= 500 and err.status != 503


def multipart(parts: Sequence[tuple[str, str, bytes | memoryview]]) -> dict[str, Any]:
    """`content` and `headers` of a `multipart/mixed` body of (name, type, bytes) parts.

    The content is a list of pieces, so a chunk is sent without being copied.
    """
    boundary = f"hyper-assets-{random.getrandbits(64):016x}"
    pieces: list[bytes | memoryview] = []
    for name, content_type, data in parts:
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="file"\r\n'
            f"Content-Type: {content_type}\r\n\r\n"
        )
        pieces += [head.encode(), data, b"\r\n"]
    pieces.append(f"--{boundary}--\r\n".encode())
    length = str(sum(len(piece) for piece in pieces))
    content_type = f"multipart/mixed; boundary={boundary}"
    return {"content": pieces, "headers": {"Content-Type": content_type, "Content-Length": length}}


def _read(response: httpx.Response, call: str) -> None:
    """Reads the body of a streamed reply, as `httpx.Client.send` does unstreamed, closing
    the reply when that fails; a body that does not decode is an `UnexpectedReplyError`."""
    try:
        response.read()
    except httpx.DecodingError as err:
        response.close()
        raise _undecodable(response, call, err) from err
    except BaseException:
        response.close()
        raise


def _undecodable(
    response: httpx.Response, call: str, err: httpx.DecodingError
) -> UnexpectedReplyError:
    encoding = response.headers.get("Content-Encoding", "")
    return UnexpectedReplyError(
        response.status_code,
        str(response.url),
        None,
        call=call,
        problem=f"its body is not the {encoding!r} its Content-Encoding says ({err})",
    )


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds (a number or an HTTP date), if the server sent one."""
    value = response.headers.get("Retry-After", "").strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
