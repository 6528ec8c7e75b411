"""`TableauServerResource` and `TableauClient`: Tableau's REST API over httpx.

    tableau = TableauServerResource(
        server_url="https://tableau.example.com", site="sales",
        token_name="ci", token_secret=dagster.EnvVar("TABLEAU_TOKEN_SECRET"),
    )  # or connected_app_client_id=.., connected_app_secret_id=.., .._secret_value, username
    with tableau.client() as client:
        project = client.project("Finance/Reports")
        source = client.publish_file("sales.hyper", "Sales", project.id, overwrite=True)
        job = client.update_data(source.id, actions, payload="changes.hyper", request_id=rid)
        client.wait_for_job(job.id)

Three layers, bottom up: `_Transport` sends one request and retries it as `RetryPolicy`
allows; `TableauClient._call` adds the session (lazy sign-in, one fresh sign-in on 401)
and turns Tableau's errors into `TableauRequestError`s that say what to do; the endpoint
methods return small dataclasses. Replies are asked for as JSON (`Accept: application/json`);
an XML `tsResponse` (which some endpoints send anyway) is read into the same shape, and
anything else (an HTML page, an empty body, a reply without the element asked for) is an
`UnexpectedReplyError` with the status, the URL and the first bytes of the body.

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

import json
import logging
import random
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote
from xml.sax.saxutils import quoteattr

import httpx
from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from hyper_assets._files import MEGABYTE
from hyper_assets.errors import (
    AmbiguousProjectError,
    ConfigurationError,
    DataSourceExistsError,
    PayloadTooLargeError,
    ProjectNotFoundError,
    TableauConnectionError,
    TableauJobCancelledError,
    TableauJobError,
    TableauJobTimeoutError,
    TableauRequestError,
    TableauSignInError,
    UnexpectedReplyError,
)
from hyper_assets.tableau.actions import Action, batch_to_json
from hyper_assets.tableau.connected_app import PUBLISH_SCOPES, connected_app_jwt

log = logging.getLogger(__name__)

BOOTSTRAP_VERSION = "2.4"  # every server answers serverinfo here; TSC asks here too
UPDATE_MIN_VERSION = (3, 12)  # PATCH .../data appeared in REST API 3.12 (Tableau 2021.2)
SUCCESS_CODES = (0, 3)  # finishCode 3 means "completed": a success too
CANCELLED = 2
OCTETS = "application/octet-stream"
UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

UploadProgress = Callable[[int, int], None]  # (bytes uploaded, file size)
BATCH_ADVICE = (
    "An update batch is atomic, so the data source is unchanged: fix the cause and send the "
    "batch again with a new RequestID (the same one returns this job for 24 hours)."
)
T = TypeVar("T")


@dataclass(frozen=True)
class Project:
    id: str
    name: str
    parent_id: str | None
    path: str  # names from the top-level project down, joined by "/"


@dataclass(frozen=True)
class DataSource:
    id: str
    name: str
    project_id: str
    #: Its page in Tableau's web client as the reply gave it (`webpageUrl`), else None. Real
    #: servers put it in list replies, not in the reply to a publish.
    webpage_url: str | None


@dataclass(frozen=True)
class Job:
    id: str
    finish_code: int | None  # None until the job completes
    progress: int
    notes: str | None
    completed_at: datetime | None


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, bounded in retries and in total seconds."""

    max_retries: int = 5
    initial_delay: float = 0.5
    max_delay: float = 30.0
    max_total: float = 300.0

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds before retry number `retry` (from 0); the server's Retry-After wins."""
        if retry_after is not None:
            return retry_after
        ceiling = min(self.max_delay, self.initial_delay * 2**retry)
        return ceiling / 2 + random.uniform(0, ceiling / 2)


class TableauServerResource(ConfigurableResource):
    """Where Tableau is and how to talk to it; `client()` opens a `TableauClient`."""

    server_url: str = Field(description="Base URL, e.g. https://tableau.example.com.")
    site: str = Field(default="", description='Site content URL; "" is the default site.')
    token_name: str = Field(default="", description="Personal access token name.")
    token_secret: str = Field(
        default="", repr=False, description="Token secret: pass dagster.EnvVar(..)."
    )
    connected_app_client_id: str = Field(default="", description="Connected App (direct trust).")
    connected_app_secret_id: str = Field(default="", description="The app secret's id.")
    connected_app_secret_value: str = Field(
        default="", repr=False, description="The app secret's value: pass dagster.EnvVar(..)."
    )
    username: str = Field(default="", description="The user a Connected App acts as.")
    scopes: list[str] = Field(
        default_factory=lambda: list(PUBLISH_SCOPES),
        description="What a Connected App's JWT grants: by default what a publish calls.",
    )
    api_version: str | None = Field(default=None, description="Default: the server's.")
    project_match_case: bool = Field(
        default=False,
        description="Find projects by their exact letter case only. Default: a name in "
        'another case ("default") finds the project when exactly one matches regardless '
        "of case.",
    )
    verify_tls: bool = Field(default=True, description="Verify the server's certificate.")
    connect_timeout_seconds: float = 10.0
    timeout_seconds: float = Field(default=300.0, description="Read/write timeout per request.")
    upload_chunk_bytes: int = Field(
        default=50 * MEGABYTE, description="Files are read and uploaded this much at a time."
    )
    publish_as_job_bytes: int = Field(
        default=64 * MEGABYTE,
        description="Whole-file publishes above this run as a server job (asJob=true), polled "
        "to the end, as Tableau's own client does above 64 MB.",
    )
    max_retries: int = Field(default=5, description="Retries per request (0: none).")
    retry_initial_delay_seconds: float = 0.5
    retry_max_delay_seconds: float = 30.0
    retry_max_total_seconds: float = Field(default=300.0, description="Retry budget per request.")
    job_poll_initial_seconds: float = 0.5
    job_poll_max_seconds: float = 30.0
    job_timeout_seconds: float = 3600.0

    def client(self) -> TableauClient:
        """A new client; use it as a context manager so it signs out and closes."""
        return TableauClient(self)


class _Transport:
    """Sends one HTTP request and retries it while that is safe (see the module docstring)."""

    def __init__(self, http: httpx.Client, policy: RetryPolicy) -> None:
        self.http = http
        self.policy = policy

    def send(self, method: str, url: str, *, repeatable: bool, **kwargs: Any) -> httpx.Response:
        started, retry = time.monotonic(), 0
        while True:
            try:
                response = self.http.request(method, url, **kwargs)
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
            retry += 1

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


class TableauClient:
    """One conversation with a Tableau site: signs in on first use, signs out on close.

    Not thread-safe: open one per op (or thread).
    """

    def __init__(self, config: TableauServerResource) -> None:
        self._config = config
        http = httpx.Client(
            base_url=config.server_url,
            verify=config.verify_tls,
            timeout=httpx.Timeout(config.timeout_seconds, connect=config.connect_timeout_seconds),
            headers={"Accept": "application/json"},
        )
        policy = RetryPolicy(
            config.max_retries,
            config.retry_initial_delay_seconds,
            config.retry_max_delay_seconds,
            config.retry_max_total_seconds,
        )
        self._transport = _Transport(http, policy)
        self._version = config.api_version
        self._token: str | None = None
        self._site_id = ""

    @property
    def site_url(self) -> str:
        """Where this client publishes: the server URL and the site's content URL."""
        return f"{self._config.server_url.rstrip('/')}/#/site/{self._config.site}"

    @property
    def jobs_page(self) -> str:
        """The site's Jobs page in Tableau's web UI, where a failed job's details show."""
        site = f"site/{quote(self._config.site, safe='')}/" if self._config.site else ""
        return f"{self._config.server_url.rstrip('/')}/#/{site}jobs"

    # --- session -----------------------------------------------------------------------------

    @property
    def api_version(self) -> str:
        """The configured REST API version, else the server's (asked once, no sign-in)."""
        if self._version is None:
            url = f"/api/{BOOTSTRAP_VERSION}/serverinfo"
            response = self._transport.send("GET", url, repeatable=True)
            self._version = _body(
                response, "server info", lambda reply: str(reply["serverInfo"]["restApiVersion"])
            )
            log.info("Tableau REST API version %s", self._version)
        return self._version

    def sign_in(self) -> None:
        """Sign in with the personal access token, or a fresh Connected App JWT (done on
        first use, and again on 401: a JWT lives minutes, a session hours)."""
        config = self._config
        if bool(config.token_name) == bool(config.connected_app_client_id):
            raise ConfigurationError(
                "Configure one way to sign in to Tableau: token_name and token_secret (a "
                "personal access token), or connected_app_client_id, connected_app_secret_id, "
                "connected_app_secret_value and username (a Connected App)."
            )
        if config.token_name:
            who = f"token {config.token_name!r}"
            credentials: dict[str, Any] = {
                "personalAccessTokenName": config.token_name,
                "personalAccessTokenSecret": _plain(config.token_secret, "the token secret"),
            }
        else:
            who = f"connected app {config.connected_app_client_id!r} as {config.username!r}"
            jwt = connected_app_jwt(
                config.connected_app_client_id,
                _plain(config.connected_app_secret_id, "the connected app's secret id"),
                _plain(config.connected_app_secret_value, "the connected app's secret value"),
                config.username,
                config.scopes,
            )
            credentials = {"jwt": jwt}
        credentials["site"] = {"contentUrl": config.site}
        url = f"/api/{self.api_version}/auth/signin"
        response = self._transport.send(
            "POST", url, repeatable=True, json={"credentials": credentials}
        )
        self._token, self._site_id = _body(
            response,
            f"sign-in to site {config.site!r} with {who}",
            lambda reply: (reply["credentials"]["token"], reply["credentials"]["site"]["id"]),
        )
        log.info("Signed in to Tableau site %r with %s", config.site, who)

    def close(self) -> None:
        """Sign out (if signed in) and close the connections."""
        if self._token is not None:
            url = f"/api/{self.api_version}/auth/signout"
            headers, self._token = {"X-Tableau-Auth": self._token}, None
            try:
                self._transport.send("POST", url, repeatable=False, headers=headers)
            except TableauConnectionError as err:
                log.info("Tableau sign-out failed (the session will expire): %s", err)
        self._transport.http.close()

    def __enter__(self) -> TableauClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(
        self,
        method: str,
        call: str,
        segments: Sequence[str],
        *,
        read: Callable[[Any], T],
        repeatable: bool = True,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> T:
        """A request under the site, signed in (again, once, on 401); `read` of its reply."""

        def send() -> httpx.Response:
            if self._token is None:
                self.sign_in()
            path = "/".join(quote(s, safe=":") for s in ("sites", self._site_id, *segments))
            url = f"/api/{self.api_version}/{path}"
            auth = {"X-Tableau-Auth": self._token or "", **(headers or {})}
            return self._transport.send(method, url, repeatable=repeatable, headers=auth, **kwargs)

        response = send()
        if response.status_code == 401:
            log.info("Tableau session expired or was ended; signing in again")
            self._token = None
            response = send()
        return _body(response, call, read)

    def _named(self, call: str, segment: str, name: str) -> Iterator[dict[str, Any]]:
        """Every item of a list endpoint named `name`, page by page."""
        # Tableau separates filter expressions with commas, so such a name cannot be a filter.
        query = {} if "," in name else {"filter": f"name:eq:{name}"}
        yield from (item for item in self._list(call, segment, query) if item["name"] == name)

    def _list(self, call: str, segment: str, query: dict[str, str]) -> Iterator[dict[str, Any]]:
        """Every item of a list endpoint, page by page."""
        number = 1
        while True:
            params = {**query, "pageSize": 100, "pageNumber": number}
            items, size, total = self._call(
                "GET", call, [segment], read=lambda reply: _page(reply, segment), params=params
            )
            yield from items
            if number * size >= total:
                return
            number += 1

    # --- projects and data sources -------------------------------------------------------------

    def project(self, path: str) -> Project:
        """The project at `path`: a name, or names from a parent down (`"Sales/EMEA"`).

        The names must match the end of exactly one project's full path; a leading "/"
        anchors them at the top level. Without such a match, names in another letter case
        ("default") match too, unless `project_match_case`. None or several is a
        `ProjectLookupError` listing the candidates.
        """
        wanted = tuple(path.strip("/").split("/"))
        items = list(self._list(f"lookup of project {path!r}", "projects", {}))
        by_id = {item["id"]: item for item in items}

        def names(item: dict[str, Any]) -> tuple[str, ...]:
            parent = by_id.get(item.get("parentProjectId") or "")
            return (*(names(parent) if parent else ()), item["name"])

        anchored = path.startswith("/")
        projects, found, folded = [], [], []
        for item in items:
            full = names(item)
            project = Project(
                item["id"], item["name"], item.get("parentProjectId") or None, "/".join(full)
            )
            projects.append(project)
            end = full if anchored else full[-len(wanted) :]
            if end == wanted:
                found.append(project)
            elif not self._config.project_match_case and _folded(end) == _folded(wanted):
                folded.append(project)
        if not found and folded:
            log.info(
                "Project %r matched %s regardless of case", path, _listed([p.path for p in folded])
            )
        found = found or folded
        if len(found) == 1:
            return found[0]
        site = f"Tableau site {self._config.site!r}"
        if found:
            candidates = sorted(p.path for p in found)
            how = "in its exact case" if found is folded else "by more of its path"
            raise AmbiguousProjectError(
                f"{site} has {len(found)} projects matching {path!r}"
                f"{' regardless of case' if found is folded else ''}: {_listed(candidates)}. "
                f"Name one exactly, {how}, e.g. project={candidates[0]!r}.",
                candidates=candidates,
            )
        named = sorted(p.path for p in projects if _folded([p.name]) == _folded(wanted[-1:]))
        candidates = named or sorted(p.path for p in projects)
        raise ProjectNotFoundError(
            f"{site} has no project {path!r} that the token's user can see; "
            f"{'projects of that name' if named else 'its projects'}: {_listed(candidates)}. "
            'Give a name or a path such as "Sales/EMEA" from these.',
            candidates=candidates,
        )

    def find_datasource(self, name: str, project_id: str) -> DataSource | None:
        """The data source named `name` in the project, or None."""
        for item in self._named(f"lookup of data source {name!r}", "datasources", name):
            if item["project"]["id"] == project_id:
                return _datasource(item)
        return None

    def publish_file(
        self,
        path: str | Path,
        name: str,
        project_id: str,
        *,
        overwrite: bool = False,
        on_progress: UploadProgress | None = None,
    ) -> DataSource:
        """Publish a whole `.hyper` file as data source `name`, uploaded in chunks.

        Without `overwrite`, an existing `name` raises `DataSourceExistsError`. A file
        larger than `publish_as_job_bytes` is published as a server job (`asJob=true`),
        which is polled to its end: a long synchronous publish runs into request timeouts.
        """
        size = Path(path).stat().st_size
        as_job = size > self._config.publish_as_job_bytes
        session_id = self.upload_file(path, on_progress)
        request = (
            f"<tsRequest><datasource name={quoteattr(name)}>"
            f"<project id={quoteattr(project_id)}/></datasource></tsRequest>"
        )
        mode = "true" if overwrite else "false"
        params = {"uploadSessionId": session_id, "datasourceType": "hyper", "overwrite": mode}
        params |= {"asJob": "true"} if as_job else {}
        parts = [("request_payload", "text/xml", request.encode())]
        try:
            sent = self._call(
                "POST",
                f"publish of {name!r}",
                ["datasources"],
                read=_job if as_job else lambda reply: _datasource(reply["datasource"]),
                repeatable=False,
                params=params,
                **_multipart(parts),
            )
        except TableauConnectionError as err:
            if not err.maybe_applied:
                raise
            raise TableauConnectionError(
                f"{err} Look it up with find_datasource(), or publish again with overwrite=True.",
                maybe_applied=True,
            ) from err
        source = self._finish_publish(sent, name, project_id) if isinstance(sent, Job) else sent
        log.info("Published %s as data source %r (%s)", Path(path).name, name, source.id)
        return source

    def _finish_publish(self, job: Job, name: str, project_id: str) -> DataSource:
        """Wait for a publish job, logging its progress; the data source it published."""
        log.info("Publishing %r runs as Tableau job %s", name, job.id)
        shown = [-1]

        def report(polled: Job) -> None:
            if polled.progress != shown[0]:
                shown[0] = polled.progress
                log.info("Publish job %s: %d%%", polled.id, polled.progress)

        self.wait_for_job(
            job.id, on_progress=report, advice="The data source was not replaced: publish again."
        )
        source = self.find_datasource(name, project_id)
        if source is None:
            raise TableauJobError(
                f"Tableau publish job {job.id} succeeded, but project {project_id} has no data "
                f"source {name!r}: look the job up on the site's Jobs page ({self.jobs_page}).",
                job_id=job.id,
                finish_code=0,
                notes=None,
            )
        return source

    # --- uploads, data updates and jobs -------------------------------------------------------

    def upload_file(self, path: str | Path, on_progress: UploadProgress | None = None) -> str:
        """Upload a file in chunks, read from disk one at a time; its upload session id.

        A chunk sent without a clear answer is not sent again (it could be appended twice):
        the upload starts over in a new session, at most `max_retries` times.
        """
        path, restarts = Path(path), 0
        while True:
            session_id = self._call(
                "POST",
                "start of an upload",
                ["fileUploads"],
                read=lambda reply: str(reply["fileUpload"]["uploadSessionId"]),
            )
            try:
                self._append_chunks(session_id, path, on_progress)
            except (TableauConnectionError, TableauRequestError) as err:
                if restarts >= self._config.max_retries or not _maybe_applied(err):
                    raise
                restarts += 1
                log.warning("Upload of %s failed mid-chunk (%s); starting over", path.name, err)
            else:
                return session_id

    def _append_chunks(
        self, session_id: str, path: Path, on_progress: UploadProgress | None
    ) -> None:
        done, total = 0, path.stat().st_size
        buffer = bytearray(self._config.upload_chunk_bytes)  # one buffer, refilled per chunk
        with path.open("rb") as file:
            while size := file.readinto(buffer):
                chunk = memoryview(buffer)[:size]
                parts = [("request_payload", "text/xml", b""), ("tableau_file", OCTETS, chunk)]
                body = _multipart(parts)
                try:
                    self._call(
                        "PUT",
                        f"upload of {path.name}",
                        ["fileUploads", session_id],
                        read=lambda reply: reply["fileUpload"],
                        repeatable=False,
                        **body,
                    )
                finally:
                    # httpx's request objects sit in reference cycles until the garbage
                    # collector runs: emptying the body releases the buffer's view now.
                    body["content"].clear()
                    chunk.release()
                done += size
                log.debug("Uploaded %d of %d bytes of %s", done, total, path.name)
                if on_progress is not None:
                    on_progress(done, total)

    def update_data(
        self,
        datasource_id: str,
        actions: Sequence[Action],
        *,
        request_id: str,
        payload: str | Path | None = None,
        on_progress: UploadProgress | None = None,
    ) -> Job:
        """Upload `payload` (if any) and send the action batch; the queued job.

        Tableau runs one `request_id` once within 24 hours and answers a repeat with the
        original job, which makes a retry safe; a failed batch needs a new `request_id`.
        """
        if tuple(int(part) for part in self.api_version.split(".")) < UPDATE_MIN_VERSION:
            raise ConfigurationError(
                f"Tableau REST API {self.api_version} cannot update data (it needs 3.12, "
                "Tableau 2021.2): upgrade the server, or publish the whole file instead."
            )
        params = {}
        if payload is not None:
            params["uploadSessionId"] = self.upload_file(payload, on_progress)
        return self._call(
            "PATCH",
            f"data update of {datasource_id} (RequestID {request_id})",
            ["datasources", datasource_id, "data"],
            read=_job,
            params=params,
            json=batch_to_json(actions),
            headers={"RequestID": request_id},
        )

    def get_job(self, job_id: str) -> Job:
        return self._call("GET", f"lookup of job {job_id}", ["jobs", job_id], read=_job)

    def cancel_job(self, job_id: str) -> None:
        """Cancel a job that has not started yet."""
        self._call(
            "PUT", f"cancel of job {job_id}", ["jobs", job_id], read=_nothing, repeatable=False
        )

    def wait_for_job(
        self,
        job_id: str,
        *,
        on_progress: Callable[[Job], None] | None = None,
        advice: str = BATCH_ADVICE,
    ) -> Job:
        """Poll until the job completes; it if it succeeded, else raise with its notes and
        `advice` (by default: what to do about a failed update batch)."""
        config = self._config
        deadline = time.monotonic() + config.job_timeout_seconds
        delay = config.job_poll_initial_seconds
        while True:
            job = self.get_job(job_id)
            if on_progress is not None:
                on_progress(job)
            if job.completed_at is not None:
                break
            if time.monotonic() + delay > deadline:
                raise TableauJobTimeoutError(
                    f"Tableau job {job_id} is still running after {config.job_timeout_seconds:g}"
                    " s: wait for it again, or raise job_timeout_seconds.",
                    job_id=job_id,
                    finish_code=None,
                    notes=job.notes,
                )
            time.sleep(delay)
            delay = min(delay * 1.5, config.job_poll_max_seconds)
        if job.finish_code in SUCCESS_CODES:
            return job
        cancelled = job.finish_code == CANCELLED
        outcome = "was cancelled" if cancelled else f"failed (finishCode {job.finish_code})"
        cause = (
            f"Tableau's notes: {job.notes}"
            if job.notes
            else f"Tableau gave no notes: look job {job_id} up on the site's Jobs page "
            f"({self.jobs_page}) or in the server's backgrounder logs"
        )
        raise (TableauJobCancelledError if cancelled else TableauJobError)(
            f"Tableau job {job_id} {outcome}. {cause}. {advice}",
            job_id=job_id,
            finish_code=job.finish_code,
            notes=job.notes,
        )


# --- wire helpers ------------------------------------------------------------------------------


def _plain(secret: str, what: str) -> str:
    """The secret; an `EnvVar` used outside a Dagster run is read from the environment."""
    if not isinstance(secret, EnvVar):
        return secret
    if not (value := secret.get_value()):
        raise ConfigurationError(
            f"The environment variable {secret.env_var_name} ({what}) is not set."
        )
    return value


def _body(response: httpx.Response, call: str, read: Callable[[Any], T]) -> T:
    """`read` of a successful reply; otherwise Tableau's error, saying what to do.

    A reply that is not a Tableau reply, or lacks what `read` takes from it, is an
    `UnexpectedReplyError` quoting the status, the URL and the first bytes.
    """
    reply = _decode(response.content)
    url = str(response.request.url)
    if response.is_success:
        if reply is None and response.content.strip():
            problem = "the reply is neither Tableau's XML nor JSON"
        else:
            try:
                return read(reply or {})
            except (KeyError, TypeError, ValueError, AttributeError) as err:
                problem = f"the reply lacks {err}" if reply else "the reply is empty"
        raise UnexpectedReplyError(
            response.status_code, url, response.content, call=call, problem=problem
        )
    error = (reply or {}).get("error")
    error = error if isinstance(error, dict) else {}
    status = response.status_code
    code = str(error.get("code") or status)
    error_class, hint = _advice(status, code)
    summary = error.get("summary") or response.reason_phrase
    detail = error.get("detail") or f"{url} answered {response.content[:200]!r}"
    raise error_class(status, code, str(summary), str(detail), call=call, hint=hint)


def _decode(body: bytes) -> dict[str, Any] | None:
    """A `tsResponse` as JSON or XML, in Tableau's JSON shape; None for anything else."""
    body = body.strip()
    try:
        if body.startswith(b"{"):
            value = json.loads(body)
            return value if isinstance(value, dict) else None
        root = ET.fromstring(body) if body.startswith(b"<") else None
    except (ValueError, ET.ParseError):
        return None
    if root is None or _local(root.tag) != "tsResponse":
        return None
    tree = _from_xml(root)
    return tree if isinstance(tree, dict) else {}


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _from_xml(element: ET.Element) -> Any:
    """An element as Tableau's JSON shapes it: attributes and children by name (repeated
    children as a list), an element holding only text as that text."""
    value: dict[str, Any] = {_local(k): v for k, v in element.attrib.items()}
    for child in element:
        key, item = _local(child.tag), _from_xml(child)
        if key not in value:
            value[key] = item
        elif isinstance(value[key], list):
            value[key].append(item)
        else:
            value[key] = [value[key], item]
    text = (element.text or "").strip()
    return text if text and not value else value


def _items(container: Any, tag: str) -> list[dict[str, Any]]:
    """The items of a list element (`{"projects": {"project": [...]}}`); one item may come
    as an object instead of a one-item list, and an empty list as nothing at all."""
    items = container.get(tag, []) if isinstance(container, dict) else []
    return [items] if isinstance(items, dict) else list(items)


def _page(reply: dict[str, Any], segment: str) -> tuple[list[dict[str, Any]], int, int]:
    """A page of a list endpoint: its items, the page size and the total available."""
    page = reply["pagination"]
    items = _items(reply.get(segment), segment.removesuffix("s"))
    return items, int(page["pageSize"]), int(page["totalAvailable"])


def _folded(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(name.casefold() for name in names)


def _listed(names: list[str], most: int = 20) -> str:
    shown = ", ".join(repr(name) for name in names[:most]) or "none"
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _nothing(reply: Any) -> None:
    return None


HINTS = {
    400: "Tableau could not use the request; the detail names what to fix.",
    401: "Check the personal access token name and secret and the site content URL; a token "
    "expires after 15 days unused, or when it is regenerated or revoked. A Connected App: "
    "check its client id, secret id and value, that it is enabled, and the username.",
    403: "The token's user lacks a permission this needs (publishing, or the project).",
    404: "Check the name or id: it does not exist on this site (any more).",
    409: "It conflicts with the server's state: an upload can be used once, upload again.",
    413: "Lower the batch size: send the change as several smaller payloads, each below the "
    "server's limit (100 MB by default).",
    429: "Tableau kept rate-limiting after every retry: send fewer requests at once, or raise "
    "max_retries and retry_max_total_seconds.",
}


def _advice(status: int, code: str) -> tuple[type[TableauRequestError], str]:
    if code == "403007":
        return DataSourceExistsError, "Publish with overwrite=True to replace it."
    if status >= 500:
        return TableauRequestError, "Tableau kept failing after every retry: try again later."
    special = {401: TableauSignInError, 413: PayloadTooLargeError}
    return special.get(status, TableauRequestError), HINTS.get(status, "")


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds (a number or an HTTP date), if the server sent one."""
    value = response.headers.get("Retry-After", "").strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _maybe_applied(err: TableauConnectionError | TableauRequestError) -> bool:
    if isinstance(err, TableauConnectionError):
        return err.maybe_applied
    return err.status >= 500 and err.status != 503


def _multipart(parts: list[tuple[str, str, bytes | memoryview]]) -> dict[str, Any]:
    """`content` and `headers` of a `multipart/mixed` body of (name, type, bytes) parts.

    The content is a list of pieces, so a chunk is sent without being copied.
    """
    boundary = f"hyper-assets-{random.getrandbits(64):016x}"
    pieces = []
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


def _datasource(item: dict[str, Any]) -> DataSource:
    page = item.get("webpageUrl")
    return DataSource(item["id"], item["name"], item["project"]["id"], page or None)


def _job(reply: dict[str, Any]) -> Job:
    item = reply["job"]
    finish, completed = item.get("finishCode"), item.get("completedAt")
    return Job(
        item["id"],
        int(finish) if finish is not None else None,
        int(item.get("progress") or 0),
        _notes(item),
        datetime.fromisoformat(completed) if completed else None,
    )


def _notes(value: Any, key: str = "") -> str | None:
    """Every `notes` text in a job, wherever the server put it (real servers: inside the
    job-type element, e.g. `updateUploadedFileJob`), one per line; None without any."""
    if isinstance(value, dict):
        found = [_notes(child, name) for name, child in value.items()]
    elif isinstance(value, list):
        found = [_notes(child, key) for child in value]
    else:
        found = [value.strip()] if key == "notes" and isinstance(value, str) else []
    return "\n".join(note for note in found if note) or None
