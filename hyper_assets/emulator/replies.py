"""The elements the emulator's replies carry, as recorded from real servers.

Projects, data sources, uploads and jobs as TSC's recorded assets show them
(tests/tableau/test_emulator_replies.py compares them attribute by attribute).
"""

from __future__ import annotations

from urllib.parse import quote

from hyper_assets._base.files import MEGABYTE
from hyper_assets.emulator.jobs import UPDATE, Job
from hyper_assets.emulator.rest import Request
from hyper_assets.emulator.store import Datasource, Project
from hyper_assets.emulator.wire import Node, stamp

OWNER_ID = "dd2239f6-ddf1-4107-981a-4cf94e415794"  # the site administrator owning everything


def parent_id(project: Project) -> str:
    return project.parent.id if project.parent else ""


def top_level(project: Project) -> str:
    return "true" if project.parent is None else "false"


def project_node(project: Project) -> Node:
    """A project as real servers list it: attributes, then its `<owner>`."""
    attrs = {
        "id": project.id,
        "name": project.name,
        "description": project.description,
        "contentPermissions": "ManagedByOwner",
        **({"parentProjectId": project.parent.id} if project.parent else {}),
        "topLevelProject": top_level(project),
        "writeable": "true",
        "createdAt": stamp(project.created_at),
        "updatedAt": stamp(project.created_at),
    }
    return Node("project", attrs, [Node("owner", {"id": OWNER_ID})])


def datasource_node(request: Request, datasource: Datasource, *, page: bool = True) -> Node:
    """A data source as real servers list it: attributes, `<project>`, `<owner>`, `<tags>`.

    `webpageUrl` addresses its page by number, as recorded from a real server
    (`https://10ax.online.tableau.com/#/site/example/datasources/3566752`); without `page`
    it is left out, as from the reply to a publish recorded from a real server.
    """
    size_mb = (
        max(1, -(-datasource.path.stat().st_size // MEGABYTE)) if datasource.path.exists() else 0
    )
    attrs = {
        "id": datasource.id,
        "name": datasource.name,
        "size": str(size_mb),
        "contentUrl": datasource.name,
        "description": "",
        "type": "hyper",
        "createdAt": stamp(datasource.created_at),
        "updatedAt": stamp(datasource.updated_at),
        "encryptExtracts": "false",
        "hasExtracts": "true",
        "isCertified": "false",
        "useRemoteQueryAgent": "false",
    }
    if page:
        site = request.on_site
        url = f"http://{request.headers.get('Host', 'localhost')}/#/"
        url += f"site/{quote(site.content_url, safe='')}/" if site.content_url else ""
        attrs["webpageUrl"] = f"{url}datasources/{datasource.number}"
    project = datasource.project
    children = [
        Node("project", {"id": project.id, "name": project.name}),
        Node("owner", {"id": OWNER_ID}),
        Node("tags", many=True),
    ]
    return Node("datasource", attrs, children)


def upload_node(session_id: str, size: int) -> Node:
    return Node("fileUpload", {"uploadSessionId": session_id, "fileSize": str(size // MEGABYTE)})


def job_node(job: Job) -> Node:
    """A job as `GET jobs/{id}` shows it; `updatedAt` is its last change, as recorded."""
    attrs = {
        "id": job.id,
        "mode": "Asynchronous",
        "type": job.type,
        "progress": str(job.progress),
        "createdAt": stamp(job.created_at),
        "updatedAt": stamp(job.completed_at or job.started_at or job.created_at),
    }
    if job.started_at is not None:
        attrs["startedAt"] = stamp(job.started_at)
    if job.completed_at is not None:
        attrs["completedAt"] = stamp(job.completed_at)
        attrs["finishCode"] = str(job.finish_code)
    return Node("job", attrs, [_update_node(job, job.notes)] if job.type == UPDATE else [])


def accepted_job_node(job: Job) -> Node:
    """A job as the 202 that queues it shows it, as recorded from real servers and whatever
    the worker has done since: an update's names its data source and connection
    (datasource_data_update.xml); a publish's has no children and carries finishCode="1"
    while queued (datasource_publish_async.xml): only completedAt says that a job has ended."""
    attrs = {"id": job.id, "mode": "Asynchronous", "type": job.type}
    created = stamp(job.created_at)
    if job.type == UPDATE:
        return Node("job", {**attrs, "createdAt": created}, [_update_node(job, None)])
    return Node("job", {**attrs, "progress": "0", "createdAt": created, "finishCode": "1"})


def _update_node(job: Job, notes: str | None) -> Node:
    """An update job's type element, as recorded from real servers: the data source, the
    connection, and the notes (inside it). A publish job has none: REST API 3.28's schema
    defines no type element for one, so a failed publish carries no notes."""
    assert job.datasource is not None  # an update names the data source it changes
    children = [
        Node("datasource", {"id": job.datasource.id, "name": job.datasource.name}),
        Node("connectionLuid", text=job.connection_id),
    ]
    if notes:
        children.append(Node("notes", text=notes))
    return Node("updateUploadedFileJob", children=children)
