"""Finding a project by name or path among a site's projects, as `TableauClient.project`
does: exact names first, then (unless `match_case`) names in another letter case."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from hyper_assets.errors import AmbiguousProjectError, ProjectNotFoundError
from hyper_assets.tableau._rest.replies import Project

log = logging.getLogger(__name__)


def match_project(
    items: Sequence[dict[str, Any]], path: str, *, match_case: bool, site: str
) -> Project:
    """The one project of `items` (a site's project list) at `path`.

    The names must match the end of exactly one project's full path; a leading "/"
    anchors them at the top level. Without such a match, names in another letter case
    ("default") match too, unless `match_case`. None or several is a
    `ProjectLookupError` listing the candidates.
    """
    wanted = tuple(path.strip("/").split("/"))
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
        elif not match_case and _folded(end) == _folded(wanted):
            folded.append(project)
    if not found and folded:
        log.info(
            "Project %r matched %s regardless of case", path, _listed([p.path for p in folded])
        )
    found = found or folded
    if len(found) == 1:
        return found[0]
    where = f"Tableau site {site!r}"
    if found:
        candidates = sorted(p.path for p in found)
        how = "in its exact case" if found is folded else "by more of its path"
        raise AmbiguousProjectError(
            f"{where} has {len(found)} projects matching {path!r}"
            f"{' regardless of case' if found is folded else ''}: {_listed(candidates)}. "
            f"Name one exactly, {how}, e.g. project={candidates[0]!r}.",
            candidates=candidates,
        )
    named = sorted(p.path for p in projects if _folded([p.name]) == _folded(wanted[-1:]))
    candidates = named or sorted(p.path for p in projects)
    raise ProjectNotFoundError(
        f"{where} has no project {path!r} that the token's user can see; "
        f"{'projects of that name' if named else 'its projects'}: {_listed(candidates)}. "
        'Give a name or a path such as "Sales/EMEA" from these.',
        candidates=candidates,
    )


def _folded(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(name.casefold() for name in names)


def _listed(names: list[str], most: int = 20) -> str:
    shown = ", ".join(repr(name) for name in names[:most]) or "none"
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
