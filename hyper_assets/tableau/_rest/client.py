"""`TableauClient`: Tableau's REST API as plain Python, configured by `ClientSettings`.

    with TableauServerResource(...).client() as client:  # or TableauClient(ClientSettings(..))
        project = client.project("Finance/Reports")
        source = client.publish_file("sales.hyper", "Sales", project.id, overwrite=True)
        job = client.update_data(source.id, actions, payload="changes.hyper", request_id=rid)
        client.wait_for_job(job.id)

Calls go down three layers: `TableauServerResource` (Dagster config) builds the frozen
settings; this client adds the session (lazy sign-in, one fresh sign-in on 401) and the
endpoints; `transport.Transport` sends each request and retries it while that is safe.
`replies.parse` reads each reply into a frozen `Project`, `DataSource` or `Job`, or into
the `TableauRequestError` that says what to do; `jobs.succeeded` what a finished job means.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote
from xml.sax.saxutils import quoteattr

import httpx

from hyper_assets.errors import (
    ConfigurationError,
    TableauConnectionError,
    TableauJobError,
    TableauJobTimeoutError,
    TableauRequestError,
)
from hyper_assets.tableau._rest import jobs, replies, vds
from hyper_assets.tableau._rest.downloads import extract_hyper, save_within
from hyper_assets.tableau._rest.projects import match_project
from hyper_assets.tableau._rest.replies import DataSource, Job, Project
from hyper_assets.tableau._rest.settings import ClientSettings
from hyper_assets.tableau._rest.transport import Transport, maybe_applied, multipart
from hyper_assets.tableau.actions import Action, batch_to_json

__all__ = ["DataSource", "Job", "Project", "TableauClient", "UploadProgress"]

log = logging.getLogger(__name__)

BOOTSTRAP_VERSION = "2.4"  # every server answers serverinfo here; TSC asks here too
UPDATE_MIN_VERSION = (3, 12)  # PATCH .../data appeared in REST API 3.12 (Tableau 2021.2)
OCTETS = "application/octet-stream"

UploadProgress = Callable[[int, int], None]  # (bytes uploaded, file size)
T = TypeVar("T")


class TableauClient:
    """One conversation with a Tableau site: signs in on first use, signs out on close.

    Not thread-safe: open one per op (or thread).
    """

    def __init__(self, settings: ClientSettings) -> None:
        self._settings = settings
        self._transport = Transport(settings.http, settings.retry)
        self._version = settings.api_version
        self._token: str | None = None
        self._site_id = ""

    @property
    def site_url(self) -> str:
        """Where this client publishes: the server URL and the site's content URL."""
        return f"{self._server_url}/#/site/{self._settings.site}"

    @property
    def jobs_page(self) -> str:
        """The site's Jobs page in Tableau's web UI, where a failed job's details show."""
        site = f"site/{quote(self._settings.site, safe='')}/" if self._settings.site else ""
        return f"{self._server_url}/#/{site}jobs"

    @property
    def _server_url(self) -> str:
        return self._settings.http.server_url.rstrip("/")

    # --- session -----------------------------------------------------------------------------

    @property
    def api_version(self) -> str:
        """The configured REST API version, else the server's (asked once, no sign-in)."""
        if self._version is None:
            url = f"/api/{BOOTSTRAP_VERSION}/serverinfo"
            response = self._transport.send("GET", url, repeatable=True)
            self._version = replies.parse(
                response, "server info", lambda reply: str(reply["serverInfo"]["restApiVersion"])
            )
            log.info("Tableau REST API version %s", self._version)
        return self._version

    def sign_in(self) -> None:
        """Sign in with the personal access token, or a fresh Connected App JWT (done on
        first use, and again on 401: a JWT lives minutes, a session hours; each attempt
        of a sign-in sends a JWT of its own)."""
        site, sign_in = self._settings.site, self._settings.sign_in
        url = f"/api/{self.api_version}/auth/signin"
        response = self._transport.send(
            "POST",
            url,
            repeatable=True,
            fresh_json=lambda: {
                "credentials": {**sign_in.credentials(), "site": {"contentUrl": site}}
            },
        )
        self._token, self._site_id = replies.parse(
            response,
            f"sign-in to site {site!r} with {sign_in.who}",
            lambda reply: (reply["credentials"]["token"], reply["credentials"]["site"]["id"]),
        )
        log.info("Signed in to Tableau site %r with %s", site, sign_in.who)

    def close(self) -> None:
        """Sign out (if signed in) and close the connections."""
        if self._token is not None:
            url = f"/api/{self.api_version}/auth/signout"
            headers, self._token = {"X-Tableau-Auth": self._token}, None
            try:
                self._transport.send("POST", url, repeatable=False, headers=headers)
            except TableauConnectionError as err:
                log.info("Tableau sign-out failed (the session will expire): %s", err)
        self._transport.close()

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
        """`_send`, then `read` of its reply (or the error that says what to do)."""
        response = self._send(method, segments, repeatable=repeatable, headers=headers, **kwargs)
        return replies.parse(response, call, read)

    def _send(
        self,
        method: str,
        segments: Sequence[str],
        *,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """A request under the site, signed in (again, once, on 401); its reply (unread
        with `stream=True`: the caller closes it)."""

        def send() -> httpx.Response:
            url, auth = self._signed(segments)
            return self._transport.send(method, url, headers=auth | (headers or {}), **kwargs)

        response = send()
        if response.status_code == 401:
            log.info("Tableau session expired or was ended; signing in again")
            response.close()
            self._token = None
            response = send()
        return response

    def _signed(self, segments: Sequence[str]) -> tuple[str, dict[str, str]]:
        """The URL of a request under the site, and its session header (signing in first)."""
        if self._token is None:
            self.sign_in()
        path = "/".join(quote(s, safe=":") for s in ("sites", self._site_id, *segments))
        return f"/api/{self.api_version}/{path}", {"X-Tableau-Auth": self._token or ""}

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
                "GET",
                call,
                [segment],
                read=lambda reply: replies.page(reply, segment),
                params=params,
            )
            yield from items
            if number * size >= total:
                return
            number += 1

    def vds(self, operation: str, body: dict[str, Any]) -> Any:
        """The JSON reply of VizQL Data Service `operation` ("read-metadata",
        "get-datasource-model", "query-datasource"), signed in as the REST calls are (again,
        once, on 401); a refusal is a `VizqlDataServiceError`. A read: retried while safe."""

        def send() -> httpx.Response:
            if self._token is None:
                self.sign_in()
            headers = {"X-Tableau-Auth": self._token or ""}
            url = f"{vds.PATH}/{operation}"
            return self._transport.send("POST", url, repeatable=True, json=body, headers=headers)

        response = send()
        if response.status_code == 401:
            log.info("Tableau session expired or was ended; signing in again")
            self._token = None
            response = send()
        return vds.reply(response, operation)

    # --- projects and data sources -------------------------------------------------------------

    def project(self, path: str) -> Project:
        """The project at `path`: a name, or names from a parent down (`"Sales/EMEA"`).

        Matched as `projects.match_project` says: exact names first, then names in another
        letter case unless `project_match_case`; none or several is a `ProjectLookupError`.
        """
        items = list(self._list(f"lookup of project {path!r}", "projects", {}))
        settings = self._settings
        return match_project(
            items, path, match_case=settings.project_match_case, site=settings.site
        )

    def find_datasource(self, name: str, project_id: str) -> DataSource | None:
        """The data source named `name` in the project, or None."""
        for item in self._named(f"lookup of data source {name!r}", "datasources", name):
            if item["project"]["id"] == project_id:
                return replies.datasource(item)
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
        as_job = size > self._settings.publish_as_job_bytes
        session_id = self.upload_file(path, on_progress)
        request = (
            f"<tsRequest><datasource name={quoteattr(name)}>"
            f"<project id={quoteattr(project_id)}/></datasource></tsRequest>"
        )
        mode = "true" if overwrite else "false"
        params = {"uploadSessionId": session_id, "datasourceType": "hyper", "overwrite": mode}
        params |= {"asJob": "true"} if as_job else {}
        read: Callable[[Any], DataSource | Job] = (
            replies.job if as_job else lambda reply: replies.datasource(reply["datasource"])
        )
        try:
            sent = self._call(
                "POST",
                f"publish of {name!r}",
                ["datasources"],
                read=read,
                repeatable=False,
                params=params,
                **multipart([("request_payload", "text/xml", request.encode())]),
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
        self.wait_for_job(
            job.id,
            on_progress=jobs.progress_log(log, "Publish job"),
            advice="The data source was not replaced: publish again.",
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

    def download_datasource(self, datasource_id: str, into: Path, *, max_bytes: int) -> Path:
        """The data source's `.hyper` file ("Download Data Source"), streamed into the
        directory `into`: the file the server sends, or the one its `.tdsx` holds.

        A file larger than `max_bytes`, or a `.tdsx` holding no `.hyper`, is a `TableauError`.
        """
        call = f"download of data source {datasource_id}"
        download = into / "download"
        segments = ["datasources", datasource_id, "content"]
        params = {"includeExtract": "true"}
        reply = self._send("GET", segments, repeatable=True, stream=True, params=params)
        try:
            with self._transport.reading(reply, call):
                if not reply.is_success:
                    reply.read()
                    replies.parse(reply, call, lambda _: None)  # raises Tableau's error
                save_within(reply.iter_bytes(), download, max_bytes, call)
        finally:
            reply.close()
        return extract_hyper(download, into / "server.hyper", max_bytes, call)

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
                if restarts >= self._settings.retry.max_retries or not maybe_applied(err):
                    raise
                restarts += 1
                log.warning("Upload of %s failed mid-chunk (%s); starting over", path.name, err)
            else:
                return session_id

    def _append_chunks(
        self, session_id: str, path: Path, on_progress: UploadProgress | None
    ) -> None:
        done, total = 0, path.stat().st_size
        buffer = bytearray(self._settings.upload_chunk_bytes)  # one buffer, refilled per chunk
        with path.open("rb") as file:
            while size := file.readinto(buffer):
                chunk = memoryview(buffer)[:size]
                body = multipart(
                    [("request_payload", "text/xml", b""), ("tableau_file", OCTETS, chunk)]
                )
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
            read=replies.job,
            params=params,
            json=batch_to_json(actions),
            headers={"RequestID": request_id},
        )

    def get_job(self, job_id: str) -> Job:
        return self._call("GET", f"lookup of job {job_id}", ["jobs", job_id], read=replies.job)

    def cancel_job(self, job_id: str) -> None:
        """Cancel a job that has not started yet."""
        self._call(
            "PUT",
            f"cancel of job {job_id}",
            ["jobs", job_id],
            read=replies.nothing,
            repeatable=False,
        )

    def wait_for_job(
        self,
        job_id: str,
        *,
        on_progress: Callable[[Job], None] | None = None,
        advice: str = jobs.BATCH_ADVICE,
    ) -> Job:
        """Poll until the job completes; it if it succeeded, else raise with its notes and
        `advice` (by default: what to do about a failed update batch)."""
        settings = self._settings
        deadline = time.monotonic() + settings.job_timeout_seconds
        delay = settings.job_poll_initial_seconds
        while True:
            job = self.get_job(job_id)
            if on_progress is not None:
                on_progress(job)
            if job.completed_at is not None:
                break
            if time.monotonic() + delay > deadline:
                raise TableauJobTimeoutError(
                    f"Tableau job {job_id} is still running after "
                    f"{settings.job_timeout_seconds:g} s: wait for it again, or raise "
                    "job_timeout_seconds.",
                    job_id=job_id,
                    finish_code=None,
                    notes=job.notes,
                )
            time.sleep(delay)
            delay = min(delay * 1.5, settings.job_poll_max_seconds)
        return jobs.succeeded(job, self.jobs_page, advice)
