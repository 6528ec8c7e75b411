"""A local emulator of the Tableau REST endpoints an incremental publish touches.

It serves real HTTP on a local port, hosts one or more sites with nested projects, and
stores every published data source as a `.hyper` file (`DATA_DIR/<name>.hyper` for the
default site's "Default" project), applying update batches to them with a real hyperd:

    with Emulator(tmp_path, tokens={"ci": "s3cret"}, sites=("", "sales")) as emulator:
        server = TSC.Server(emulator.url, use_server_version=True)
        server.auth.sign_in(TSC.PersonalAccessTokenAuth("ci", "s3cret", site_id="sales"))
        ...
        emulator.faults.fail_requests("PATCH", r"/data$", status=429, retry_after=1)

It also answers Tableau's VizQL Data Service from each stored file (`api_vds`), which a
site setting turns off (`set_vds_enabled`). See docs/emulator.md for the endpoints, error
codes and fault injection.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping, Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

from hyper_assets._base.files import MEGABYTE
from hyper_assets._engine.process import SharedHyper
from hyper_assets.emulator.errors import EmulatorConfigError
from hyper_assets.emulator.faults import Faults
from hyper_assets.emulator.jobs import JobRunner
from hyper_assets.emulator.server import Api, RequestHandler
from hyper_assets.emulator.sessions import ConnectedApp, Sessions
from hyper_assets.emulator.store import Site, Sites, UploadStore

#: The largest update payload the emulated server takes, as a server's default limit
#: (configurable on a real one); above it the server answers 413. The client's own
#: batch size is `hyper_assets.tableau._publish.publish.DEFAULT_MAX_PAYLOAD_BYTES`.
SERVER_MAX_PAYLOAD_BYTES = 100 * MEGABYTE
DEFAULT_API_VERSION = "3.28"  # what Tableau Cloud serves; paths of any version are answered


class Emulator:
    """One emulated server: an HTTP thread, a job worker and (unless given) its own hyperd.

    `hyper` is for this library's tests and demo, which share their hyperd with it; leave
    it out.
    """

    def __init__(
        self,
        data_dir: str | Path,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        tokens: Mapping[str, str] | None = None,
        max_payload_bytes: int = SERVER_MAX_PAYLOAD_BYTES,
        hyper: SharedHyper | None = None,
        api_version: str = DEFAULT_API_VERSION,
        sites: Sequence[str] = ("",),
        connected_apps: Sequence[ConnectedApp] = (),
    ) -> None:
        self.data_dir = Path(data_dir)
        if not self.data_dir.is_dir():
            raise EmulatorConfigError(
                f"data dir {self.data_dir} is not a directory; create it first."
            )
        self.host, self.port = host, port
        self.sites = tuple(sites)
        self.tokens = dict(tokens) if tokens else {"emulator": secrets.token_urlsafe(24)}
        self.faults = Faults()
        self._own_hyper = hyper is None
        self._hyper = hyper or SharedHyper()
        self._sessions = Sessions(self.tokens, list(connected_apps))
        if not sites:
            raise EmulatorConfigError('host at least one site; "" is the default site.')
        self._sites = Sites(self.data_dir, list(sites))
        self._jobs = JobRunner(lambda: self._hyper.endpoint, self.faults)
        self._api = Api(
            self._sites,
            UploadStore(self.data_dir),
            self._jobs,
            self._sessions,
            self.faults,
            lambda: self._hyper.endpoint,
            max_payload_bytes=max_payload_bytes,
            api_version=api_version,
        )
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL, e.g. `http://127.0.0.1:43817` (the port is known once started)."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> Emulator:
        handler = type("BoundHandler", (RequestHandler,), {"api": self._api})
        try:
            self._httpd = ThreadingHTTPServer((self.host, self.port), handler)
        except OSError as err:
            raise EmulatorConfigError(f"cannot listen on {self.host}:{self.port}: {err}") from err
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._jobs.start()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="emulator-http", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, finish the running job, and stop the hyperd this emulator started."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        self._jobs.stop()
        if self._own_hyper:
            self._hyper.close()

    def site_dir(self, content_url: str = "") -> Path:
        """Where a site keeps its files: `N.hyper` of project "Default", `projects/P/..`."""
        return self._site(content_url).directory

    def site_id(self, content_url: str = "") -> str:
        """The id (LUID) sign-in returns for the site with `content_url`."""
        return self._site(content_url).id

    def add_project(self, path: str, site: str = "") -> str:
        """Create the project at `path` ("Sales/EMEA") and any missing parent; its id."""
        project = self._site(site).project_at(path)
        return project.id

    def datasource_file(self, name: str, project: str = "Default", site: str = "") -> Path:
        """Where data source `name` of `project` (a path) on `site` is stored."""
        return self._site(site).project_at(project, create=False).directory / f"{name}.hyper"

    def _site(self, content_url: str) -> Site:
        site = self._sites.by_content_url(content_url)
        if site is None:
            raise EmulatorConfigError(f"this emulator hosts no site {content_url!r}.")
        return site

    def set_vds_enabled(self, enabled: bool, site: str = "") -> None:
        """Turn the VizQL Data Service on or off for `site`, as its site setting does (on
        by default); while off, each request of it gets 403 with errorCode 403800."""
        self._site(site).vds_enabled = enabled

    def expire_tokens(self) -> None:
        """End every signed-in session: the next authenticated call gets 401."""
        self._sessions.expire_all()

    def forget_request_ids(self) -> None:
        """Forget every `RequestID`, as Tableau does after 24 hours (jobs stay known)."""
        self._jobs.forget_request_ids()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = [
    "DEFAULT_API_VERSION",
    "SERVER_MAX_PAYLOAD_BYTES",
    "ConnectedApp",
    "Emulator",
    "Faults",
]
