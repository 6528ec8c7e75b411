"""The extract's identity: a lost `.hyper` file is noticed, not refilled silently.

A write that creates the file gives it an identity, a UUID kept beside it in
`<database>.identity.json` (so it travels in each generation of an object-store home, and
compaction and upgrades, which rewrite the file in place, keep it). Each materialisation
records it with the home's URI (`identity_metadata`: `extract_identity`, `extract_home`).
Then:

- a write that finds the file missing, or of another identity than the asset's latest
  materialisation in this home recorded, refuses (`ExtractRecreatedError`): writing would
  make a file holding this run's rows alone while Dagster lists the earlier ones as
  materialised. A full refresh of an unpartitioned table rewrites the whole table, so it
  goes ahead with a warning (`WriteGuard.rebuilds_everything`);
- a load, a check or a publish of a table whose latest materialisation (of the partitions
  read) recorded another identity than the file's refuses likewise, before reading.

Materialisations made before identities existed record none and are not compared.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from hyper_assets._base.saved import SavedFormat
from hyper_assets._dagster.compat import instance as run_instance
from hyper_assets.errors import ExtractRecreatedError

#: The materialisation metadata holding the identity of the extract written, and its home.
IDENTITY_KEY, HOME_KEY = "extract_identity", "extract_home"
#: Where materialisations made before identities existed name the home.
_LEGACY_HOME_KEY = "dagster/uri"
_FORMAT_VERSION = 1
#: `<database>.identity.json`: always written with its version (none is refused).
RECORD = SavedFormat(
    _FORMAT_VERSION,
    lambda f: uuid.UUID(f.take("identity", str)).hex,
    lambda identity: {"identity": identity},
    "Write it again with the identity the asset's latest materialisation recorded "
    f'(metadata {IDENTITY_KEY}): {{"format_version": {_FORMAT_VERSION}, "identity": "<it>"}}.',
    unversioned=None,
)


def identity_path(database: Path) -> Path:
    return database.with_name(f"{database.name}.identity.json")


def read_identity(database: Path) -> str | None:
    """The identity of the file at `database`; None when it or its identity is missing."""
    path = identity_path(database)
    if not database.exists() or not path.exists():
        return None
    return RECORD.read(path)


def identity_metadata(identity: str, uri: str) -> dict[str, str]:
    """What a materialisation records about the extract it wrote (or published)."""
    return {IDENTITY_KEY: identity, HOME_KEY: uri}


def give_identity(database: Path, created: bool) -> str:
    """The identity of the file a write just wrote (the caller holds its lock): a new one
    when the write `created` it, or when it has none yet (a file from before identities)."""
    found = None if created else read_identity(database)
    if found is None:
        found = uuid.uuid4().hex
        RECORD.write(identity_path(database), found)
    return found


@dataclass(frozen=True)
class Recorded:
    """What a materialisation of `asset` recorded about the extract it wrote."""

    asset: dg.AssetKey
    run_id: str
    partition: str | None
    uri: str | None
    identity: str | None

    @property
    def where(self) -> str:
        partition = f", partition {self.partition}" if self.partition else ""
        return f"run {self.run_id}{partition}"


def latest(
    instance: dg.DagsterInstance, asset: dg.AssetKey, partitions: Sequence[str] | None = None
) -> list[Recorded]:
    """The latest materialisation of `asset`, or of each of `partitions`: none if never."""
    if not partitions:
        page = instance.fetch_materializations(asset, limit=1)
        return [_recorded(asset, r) for r in page.records]
    wanted, found = set(partitions), {}
    records = dg.AssetRecordsFilter(asset_key=asset, asset_partitions=sorted(wanted))
    cursor = None
    while wanted:
        page = instance.fetch_materializations(records, limit=1000, cursor=cursor)
        for record in page.records:  # newest first
            if record.partition_key in wanted:
                wanted.discard(record.partition_key)
                found[record.partition_key] = _recorded(asset, record)
        if not page.has_more:
            break
        cursor = page.cursor
    return list(found.values())


def _recorded(asset: dg.AssetKey, record: dg.EventLogRecord) -> Recorded:
    materialization = record.asset_materialization
    metadata = materialization.metadata if materialization else {}
    uri = metadata.get(HOME_KEY) or metadata.get(_LEGACY_HOME_KEY)
    identity = metadata.get(IDENTITY_KEY)
    return Recorded(
        asset,
        record.run_id,
        record.partition_key,
        str(uri.value) if uri is not None else None,
        str(identity.value) if identity is not None else None,
    )


def rebuild(asset: dg.AssetKey, partitions: dg.PartitionsDefinition | None) -> str:
    """How to rebuild `asset` from its sources once its extract was lost."""
    key = asset.to_user_string()
    again = f"dagster asset materialize --select {key}"
    if partitions is not None:
        first, last = partitions.get_first_partition_key(), partitions.get_last_partition_key()
        again += f" --partition-range {first}...{last}" if first and last else " --partition ..."
        again += "` (needs BackfillPolicy.single_run(); else launch a backfill of every partition)"
    else:
        again += "`"
    return (
        "Restore the file where `database` points (mount the volume, fix the path), or "
        f"rebuild it: `dagster asset wipe {key}` (Dagster's record of the lost rows), then "
        f"`{again}; likewise for every other asset stored in the file."
    )


def require_same(
    found: str | None,
    records: Sequence[Recorded],
    uri: str,
    doing: str,
    partitions: dg.PartitionsDefinition | None,
) -> None:
    """`ExtractRecreatedError` when a record of this home (`uri`) names another extract
    than `found` (the file's identity, None when missing). `doing`: what was refused
    ("Loading X"). Records of another home (the database moved) are not compared."""
    other = [r for r in records if r.uri == uri and r.identity not in (None, found)]
    if other:
        raise recreated(found, other[0], uri, doing, partitions, len(other))


def recreated(
    found: str | None,
    record: Recorded,
    uri: str,
    doing: str,
    partitions: dg.PartitionsDefinition | None,
    count: int = 1,
) -> ExtractRecreatedError:
    now = f"is extract {found}" if found else "is missing (or has no identity file)"
    more = f" (and {count - 1} more partition(s))" if count > 1 else ""
    was = f"extract {record.identity}" if record.identity else "it"
    return ExtractRecreatedError(
        f"{doing} refused: {uri} {now}, but Dagster's latest materialisation of "
        f"{record.asset.to_user_string()} ({record.where}{more}) was written to {was}. "
        "The extract was lost (a volume not mounted, a new container's empty disk?), or "
        "made anew since: the rows Dagster lists as materialised are not in it. "
        + rebuild(record.asset, partitions)
    )


@dataclass(frozen=True)
class WriteGuard:
    """A write's view of what Dagster recorded: the asset's latest materialisation, and
    whether the write rebuilds the whole table (a full refresh, unpartitioned). `doing`
    names the write in the error ("Writing X"); `partitions` are the asset's."""

    record: Recorded | None
    rebuilds_everything: bool
    doing: str
    partitions: dg.PartitionsDefinition | None

    def check(self, database: Path, uri: str) -> str | None:
        """Before a write to `database` (lock held): `ExtractRecreatedError` if the file is
        missing or another extract than the one recorded; a warning to log instead when
        the write rebuilds the whole table; None when all is well."""
        record = self.record
        if record is None or record.uri != uri:
            return None
        found = read_identity(database)
        if database.exists() and (record.identity is None or record.identity == found):
            return None
        if not self.rebuilds_everything:
            raise recreated(found, record, uri, self.doing, self.partitions)
        now = f"is extract {found}" if found else "is missing (or has no identity file)"
        return (
            f"{uri} {now}, not the extract Dagster's latest materialisation of "
            f"{record.asset.to_user_string()} ({record.where}) was written to: it was lost, or "
            f"made anew. {self.doing} goes ahead, as it rewrites every row of the table; "
            "the other assets stored in the file need the same: "
            + rebuild(record.asset, self.partitions)
        )


def write_guard(context: dg.OutputContext, label: str, *, replaces: bool) -> WriteGuard:
    """The guard of a write of the asset of `context`; `replaces`: the write replaces the
    rows of what it writes (the whole table, or its partitions), so that written to every
    partition (a one-run backfill of them all) it rebuilds the table."""
    instance = run_instance(context)
    # An op's output has no materialisation to compare with.
    records = latest(instance, context.asset_key) if instance and context.has_asset_key else []
    partitioned = context.has_asset_partitions
    # Listed only when there is a record to compare with: a check without one passes.
    everything = (
        bool(records)
        and replaces
        and (
            not partitioned
            or set(context.asset_partition_keys)
            >= set(
                context.asset_partitions_def.get_partition_keys(dynamic_partitions_store=instance)
            )
        )
    )
    return WriteGuard(
        records[0] if records else None,
        rebuilds_everything=everything,
        doing=f"Writing {label}",
        partitions=context.asset_partitions_def if partitioned else None,
    )


def loaded_records(
    context: dg.InputContext,
) -> tuple[list[Recorded], dg.PartitionsDefinition | None]:
    """The latest materialisation of each partition a load reads (of the asset, when
    unpartitioned; none for an op's output), and the asset's partitions."""
    instance = run_instance(context)
    if not context.has_asset_key:  # another op's output: nothing materialised to compare
        return [], None
    if not context.has_asset_partitions:
        return (latest(instance, context.asset_key) if instance else []), None
    keys = context.asset_partition_keys
    records = latest(instance, context.asset_key, keys) if instance else []
    return records, context.asset_partitions_def
