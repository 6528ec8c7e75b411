"""Sites, their nested projects and published data sources as `.hyper` files, and uploads.

Each site keeps its files in its own directory: the default site ("") in the data
directory itself, a site with content URL `C` in `DATA_DIR/sites/C/`. In a site's
directory a data source `N` of the built-in project "Default" is `N.hyper`; one of the
project `Sales/EMEA` is `projects/Sales/EMEA/N.hyper`. Ids derive from these names (uuid5),
so a restarted emulator serves the projects and files already there under the same ids.
A data source also has a number, as on real servers, whose web pages address data sources
by number rather than by id (`#/site/C/datasources/3566752`); it derives from the id too.
Each data source has a lock: the job runner holds it while applying a batch and `publish`
while it swaps the file in, so the two never overlap.
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.wire import bad_request, not_found, now

_NAMESPACE = uuid.UUID("5b0c7f36-58a4-4c3e-9d7e-2f6a1f0e4b11")
DEFAULT_PROJECT = "Default"
DEFAULT_DESCRIPTION = "The default project that was automatically created by Tableau."
INTERNAL_DIR = ".emulator"
MAX_NAME_BYTES = 200


def _id(*parts: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, "/".join(parts)))


@dataclass(eq=False)
class Project:
    id: str
    name: str
    parent: Project | None
    description: str
    directory: Path  # where its data sources are stored
    created_at: datetime = field(default_factory=now)

    @property
    def path(self) -> tuple[str, ...]:
        """The names from the top-level project down to this one."""
        return (*(self.parent.path if self.parent else ()), self.name)


@dataclass(eq=False)
class Datasource:
    id: str
    number: int  # what the server's web pages address it by, unique on its site
    name: str
    connection_id: str
    path: Path
    project: Project
    created_at: datetime
    updated_at: datetime
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def check_name(name: str, what: str = "data source") -> str:
    """A name usable as a file or directory name; anything else is a 400 naming the rule."""
    problem = None
    if not name or not name.strip():
        problem = "is empty"
    elif "/" in name or "\\" in name or "\x00" in name:
        problem = "contains a path separator or NUL"
    elif ".." in name or name.startswith("."):
        problem = "starts with '.' or contains '..'"
    elif any(ord(ch) < 32 for ch in name):
        problem = "contains a control character"
    elif len(name.encode()) > MAX_NAME_BYTES:
        problem = f"is longer than {MAX_NAME_BYTES} bytes in UTF-8"
    if problem:
        raise bad_request(f"{what} name {name!r} {problem}; the emulator stores it as a file.")
    return name


class Site:
    """One site: its content URL and id, its projects and data sources in `directory`."""

    def __init__(self, content_url: str, directory: Path) -> None:
        self.content_url = content_url
        self.vds_enabled = True  # the site setting that lets the VizQL Data Service answer
        self.id = _id("site", content_url)
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._projects: dict[str, Project] = {}
        self._datasources: dict[str, Datasource] = {}
        self._guard = threading.Lock()
        self.default = self._add_project(DEFAULT_PROJECT, None, DEFAULT_DESCRIPTION)
        self._scan(self.default)
        tree = self.directory / "projects"
        for folder in sorted(tree.rglob("*")) if tree.is_dir() else []:
            if folder.is_dir() and not folder.name.startswith("."):
                self._scan(self.project_at("/".join(folder.relative_to(tree).parts)))

    def _add_project(self, name: str, parent: Project | None, description: str) -> Project:
        names = (*(parent.path if parent else ()), name)
        if names == (DEFAULT_PROJECT,):
            directory = self.directory
        else:
            directory = self.directory.joinpath("projects", *names)
        project = Project(
            _id("project", self.content_url, *names), name, parent, description, directory
        )
        self._projects[project.id] = project
        return project

    def _scan(self, project: Project) -> None:
        for path in sorted(project.directory.glob("*.hyper")):
            if not path.name.startswith("."):
                self._register(project, path.stem, path)

    def _register(self, project: Project, name: str, path: Path) -> Datasource:
        key = (self.content_url, *project.path, name)
        ds_id = _id("datasource", *key)
        modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        datasource = self._datasources.get(ds_id) or Datasource(
            ds_id,
            self._number(ds_id),
            name,
            _id("connection", *key),
            path,
            project,
            modified,
            modified,
        )
        datasource.updated_at = modified
        self._datasources[ds_id] = datasource
        return datasource

    def _number(self, ds_id: str) -> int:
        """A 7-digit number derived from the id, the next free one if another data source of
        the site has it (the caller holds the guard)."""
        taken = {d.number for d in self._datasources.values()}
        number = 1_000_000 + uuid.UUID(ds_id).int % 9_000_000
        while number in taken:
            number += 1
        return number

    # --- projects ---------------------------------------------------------------------------

    def projects(self) -> list[Project]:
        with self._guard:
            return sorted(self._projects.values(), key=lambda p: p.path)

    def project(self, project_id: str) -> Project:
        with self._guard:
            if project_id not in self._projects:
                raise not_found("404005", f"Project {project_id!r} could not be found.")
            return self._projects[project_id]

    def project_at(self, path: str, *, create: bool = True) -> Project:
        """The project at `path` ("Sales/EMEA"), creating missing ones unless `create` is off."""
        parent: Project | None = None
        for name in path.strip("/").split("/"):
            with self._guard:
                here = [p for p in self._projects.values() if p.parent is parent and p.name == name]
            if here:
                parent = here[0]
            elif create:
                parent = self.create_project(name, parent.id if parent else None, "")
            else:
                parent = None
                break
        if parent is None:  # not there, and not to be created (or `path` names no project)
            raise not_found("404005", f"Project {path!r} could not be found.")
        return parent

    def create_project(self, name: str, parent_id: str | None, description: str) -> Project:
        """A new project under `parent_id` (None: top level); names are unique among siblings."""
        check_name(name, "project")
        parent = self.project(parent_id) if parent_id else None
        with self._guard:
            if any(p.parent is parent and p.name == name for p in self._projects.values()):
                where = "/".join(parent.path) if parent else "the top level"
                raise RestApiError(
                    409,
                    "409006",
                    "Resource Conflict",
                    f"A project named {name!r} already exists in {where}; names are unique "
                    "among the projects of one parent.",
                )
            project = self._add_project(name, parent, description)
        project.directory.mkdir(parents=True, exist_ok=True)
        return project

    # --- data sources -------------------------------------------------------------------------

    def datasources(self, name: str | None = None) -> list[Datasource]:
        with self._guard:
            found = [d for d in self._datasources.values() if name is None or d.name == name]
        return sorted(found, key=lambda d: (d.project.path, d.name))

    def datasource(self, ds_id: str) -> Datasource:
        with self._guard:
            if ds_id not in self._datasources:
                raise not_found("404011", f"Data source {ds_id!r} could not be found.")
            return self._datasources[ds_id]

    def check_publish(self, name: str, project: Project, overwrite: bool) -> list[Datasource]:
        """The data source a publish would replace (if any); a name a publish cannot use,
        or an existing one without `overwrite`, is refused."""
        path = project.directory / f"{check_name(name)}.hyper"
        if path.resolve().parent != project.directory.resolve():
            raise bad_request(f"data source name {name!r} would leave the data directory.")
        with self._guard:
            existing = [
                d for d in self._datasources.values() if d.name == name and d.project is project
            ]
        if existing and not overwrite:
            raise RestApiError(
                403,
                "403007",
                "Forbidden",
                f"A data source named {name!r} already exists in project "
                f"{'/'.join(project.path)!r}; publish with overwrite=true to replace it.",
            )
        return existing

    def publish(self, name: str, project: Project, staged: Path, overwrite: bool) -> Datasource:
        """Move `staged` (a file in the data dir) to the project's `<name>.hyper`, atomically."""
        existing = self.check_publish(name, project, overwrite)
        path = project.directory / f"{name}.hyper"
        project.directory.mkdir(parents=True, exist_ok=True)
        if existing:
            with existing[0].lock:
                os.replace(staged, path)
        else:
            os.replace(staged, path)
        with self._guard:
            return self._register(project, name, path)


class Sites:
    """The sites of one emulator, by content URL (matched without regard to case) and id."""

    def __init__(self, data_dir: Path, content_urls: list[str]) -> None:
        self.data_dir = data_dir
        self._sites = [
            Site(url, data_dir if url == "" else data_dir / "sites" / check_name(url, "site"))
            for url in dict.fromkeys(content_urls)
        ]

    def by_content_url(self, content_url: str) -> Site | None:
        return next((s for s in self._sites if s.content_url.lower() == content_url.lower()), None)

    def by_id(self, site_id: str) -> Site | None:
        return next((s for s in self._sites if s.id == site_id), None)

    def staging_path(self) -> Path:
        """A fresh hidden file name in the data dir (same file system, so `os.replace` works)."""
        internal = self.data_dir / INTERNAL_DIR
        internal.mkdir(exist_ok=True)
        return internal / f"publish-{uuid.uuid4().hex}.hyper"


@dataclass
class Upload:
    path: Path
    size: int = 0
    consumed_by: str | None = None


class UploadStore:
    """File upload sessions: initiate, append chunks, then one request consumes the file."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir / INTERNAL_DIR / "uploads"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._uploads: dict[str, Upload] = {}
        self._guard = threading.Lock()
        self._counter = 0

    def initiate(self) -> str:
        with self._guard:
            self._counter += 1
            session_id = f"{self._counter}:{uuid.uuid4().hex}-1:0"
            path = self.dir / f"{uuid.uuid4().hex}.part"
            path.touch()
            self._uploads[session_id] = Upload(path)
        return session_id

    def append(self, session_id: str, chunk: bytes) -> int:
        """Add a chunk; return the size so far in bytes."""
        upload = self._open(session_id)
        with self._guard, upload.path.open("ab") as out:
            out.write(chunk)
            upload.size += len(chunk)
            return upload.size

    def size(self, session_id: str) -> int:
        return self._open(session_id).size

    def consume(self, session_id: str, consumer: str) -> Path:
        """Hand the uploaded file to `consumer`; any later use of the session is refused."""
        with self._guard:
            upload = self._open(session_id)
            upload.consumed_by = consumer
            return upload.path

    def _open(self, session_id: str) -> Upload:
        upload = self._uploads.get(session_id)
        if upload is None:
            raise not_found("404031", f"Upload session {session_id!r} does not exist.")
        if upload.consumed_by is not None:
            raise RestApiError(
                409,
                "409000",
                "Conflict",
                f"Upload session {session_id!r} was already consumed by {upload.consumed_by}; "
                "an upload can be used by one request only. Upload the file again.",
            )
        return upload
