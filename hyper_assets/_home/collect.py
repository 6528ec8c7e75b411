"""Deleting what an object-store home no longer needs: old generations' chunks, and the
chunks of writers that were killed or refused before their commit.

A writer collects right after every `keep`-th commit, under its lease. It keeps:

- every object the newest `keep` generations name (whole files of format-1 generations
  too);
- every object a generation names that stopped being current less than `grace_seconds`
  ago: a reader that read its manifest while it was current may still be downloading;
- every object younger than `grace_seconds`: a writer may have uploaded it and not yet
  committed (a stalled writer's commit is fenced by its lease, but its upload is not).

and deletes the other objects under `chunks/` and `generations/`. None of them is named
again. The collector holds the lease from its own commit through its listing to the
fence before its last delete request, so no commit falls between the listing and that
fence: the newest generation listed is the current one then, and it is kept. A later
commit names only its base generation's chunks (that generation or a newer one) and the
chunks it uploads under keys of its own (`hyper_assets._home.chunks`), so a delete that lands
late, after the lease was lost, deletes nothing a later generation names either.

Ages are counted on the store's clock (the objects' last-modified times, against the
newest object of the home), never on this machine's. Manifests are never deleted (a
deleted manifest could be created again by a stalled writer); `lease.json` is the
lease's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from itertools import pairwise

import obstore

from hyper_assets._home.chunks import CHUNKS
from hyper_assets._home.generations import (
    MANIFESTS,
    Generations,
    first_line,
    manifest_key,
    store_errors,
)
from hyper_assets.errors import HomeStoreError, HyperAssetsError, LeaseLostError

_log = logging.getLogger(__name__)
WHOLE_FILES = "generations/"  # format 1
_BATCH = 1000  # objects per delete request (S3's limit)


@dataclass(frozen=True)
class Collected:
    """What a collection kept and deleted."""

    kept_generations: tuple[int, ...]
    deleted_objects: int
    deleted_bytes: int


def collect(
    generations: Generations,
    keep: int,
    grace_seconds: float,
    fence: Callable[[], None] = lambda: None,
) -> Collected:
    """Deletes the objects of `generations`' home that no kept generation names (see the
    module's docstring); `fence` runs before each delete request (the lease's renewal:
    a collector whose lease was lost deletes nothing more)."""
    store, where = generations.store, generations.where
    with store_errors(where):
        listed = {m["path"]: m for batch in obstore.list(store) for m in batch}
    if not listed:
        return Collected((), 0, 0)
    now = max(m["last_modified"] for m in listed.values())
    recent = now - timedelta(seconds=grace_seconds)
    numbers = sorted(
        int(k.removeprefix(MANIFESTS).removesuffix(".json"))
        for k in listed
        if k.startswith(MANIFESTS)
    )
    kept = set(numbers[-keep:])
    for older, newer in pairwise(numbers):
        if listed[manifest_key(newer)]["last_modified"] > recent:
            kept.add(older)  # current until a moment ago: a reader may still download it
    named = set().union(*(generations.read(n).keys for n in kept)) if kept else set()
    doomed = [
        meta
        for key, meta in sorted(listed.items())
        if key.startswith((CHUNKS, WHOLE_FILES))
        and key not in named
        and meta["last_modified"] <= recent
    ]
    for start in range(0, len(doomed), _BATCH):
        fence()
        with store_errors(where):
            obstore.delete(store, [m["path"] for m in doomed[start : start + _BATCH]])
    collected = Collected(tuple(sorted(kept)), len(doomed), sum(m["size"] for m in doomed))
    if doomed:
        _log.info(
            "Deleted %d objects (%d bytes) of %s that none of generations %s names.",
            collected.deleted_objects,
            collected.deleted_bytes,
            where,
            ", ".join(map(str, collected.kept_generations)),
        )
    return collected


def collect_quietly(
    generations: Generations, keep: int, grace_seconds: float, fence: Callable[[], None]
) -> None:
    """`collect` after a commit: a failure is a warning in the collector's words (the
    errors' own speak of a write that was not committed), since the write is committed
    and the next collecting commit tries again."""
    where, again = generations.where, "The next collecting commit tries again."
    try:
        collect(generations, keep, grace_seconds, fence)
    except LeaseLostError:
        _log.warning(
            "The write to %s is committed, but deleting old generations' objects stopped: "
            "the write's lease was lost meanwhile (its renewal failed, or another writer "
            "took it). %s",
            where,
            again,
        )
    except HomeStoreError as error:
        _log.warning(
            "The write to %s is committed, but old generations' objects were not deleted: "
            "the store failed (%s). %s",
            where,
            first_line(error.__cause__ or error),
            again,
        )
    except HyperAssetsError as error:  # a manifest that does not parse
        _log.warning(
            "The write to %s is committed, but old generations' objects were not deleted (%s). %s",
            where,
            first_line(error),
            again,
        )
