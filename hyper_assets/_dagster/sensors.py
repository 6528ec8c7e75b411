"""`landing_sensor`: one partitioned run per file that lands in a directory.

A file version is its name, mtime (ns) and size. The cursor records the version of every
matching file still in the directory, so a file is new exactly when its version is not
the recorded one. Hence files landing in the same second, files moved in with an old
mtime (`mv`, `cp -p`, `rsync -t`) and rewritten files are all seen, and nothing is seen
twice. Files that disappear leave the cursor: it holds one entry per matching file
present (about 50 bytes each), so archiving processed files keeps it small.

The run key is `name:mtime_ns:size`. A rewritten file (new mtime or size) is a new
arrival and runs its partition again; an unchanged file never runs twice, even after a
cursor reset (Dagster skips run keys it has launched). A new file whose partition every
asset of the sensor already holds from a run started after the file's mtime (a backfill)
is recorded without a run. Land files atomically: write to a name the pattern does not
match, then rename, or a half-written file may start a run.

The sensor builds its job from the assets it is given (Dagster has no public way to ask a
job for its assets): `sensor.job`, which `Definitions(sensors=[...])` includes.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable, Sequence, Set as AbstractSet
from pathlib import Path

from dagster import (
    AssetChecksDefinition,
    AssetKey,
    AssetRecordsFilter,
    AssetsDefinition,
    AssetSelection,
    DagsterInstance,
    DefaultSensorStatus,
    DynamicPartitionsDefinition,
    PartitionsDefinition,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    define_asset_job,
    sensor,
)

from hyper_assets._base.saved import FieldError, Fields, SavedFormat
from hyper_assets.errors import ConfigurationError, CorruptFileError, UnknownFormatVersionError

LANDING_FILE_TAG = "hyper_assets/landing_file"
_CURSOR_VERSION = 1

Version = tuple[int, int]
"""(mtime_ns, size) of a file."""


def landing_sensor(
    *,
    assets: AssetsDefinition | Sequence[AssetsDefinition],
    directory: str | os.PathLike[str],
    pattern: str,
    partition_key: str | Callable[[str], str | None],
    job_name: str | None = None,
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    default_status: DefaultSensorStatus = DefaultSensorStatus.STOPPED,
    checks: Sequence[AssetChecksDefinition] = (),
) -> SensorDefinition:
    """A sensor requesting one run of `assets` per new file in `directory` matching `pattern`.

    The run is of the sensor's job, `sensor.job`: it materialises exactly `assets` and runs
    `checks`, such as the partitioned checks `build_hyper_checks` makes, each reporting on
    the partition written. Leave out unpartitioned checks of partitioned assets: a
    partitioned backfill of the job would plan each once per partition. It is named
    `job_name`, by default after the sensor's `name` (`<name>_job`) if given, else after the
    asset keys (`flights_job`): two sensors of the same assets (two landing directories)
    need a name each. The assets must share one
    partitions definition.

    `pattern` is a file-name glob (`"flights_*.parquet"`, not recursive). `partition_key`
    maps a file name to its partition: a regex searched in the name whose first group
    (or whole match) is the key, or a callable returning the key or None. A file whose
    key is not (yet) a partition of the assets waits, named in the tick's log, and runs
    once its partition exists (a daily partition once the day is over, a dynamic one once
    added to the instance).
    """
    assets_defs = [assets] if isinstance(assets, AssetsDefinition | str) else list(assets)
    partitions_def = _shared_partitions(assets_defs)
    asset_keys = frozenset(key for assets_def in assets_defs for key in assets_def.keys)
    key_of = _key_function(partition_key)
    if not pattern or "/" in pattern or os.sep in pattern:
        raise ConfigurationError(
            f"landing_sensor pattern {pattern!r} must be a file-name glob such as "
            "'flights_*.parquet'; put the folder in directory=."
        )
    root = Path(directory)
    job = define_asset_job(
        job_name or f"{name or '_'.join(sorted('__'.join(key.path) for key in asset_keys))}_job",
        selection=AssetSelection.assets(*assets_defs).without_checks()
        | AssetSelection.checks(*checks),
    )
    sensor_name = name or f"{job.name}_landing_sensor"

    @sensor(
        job=job,
        name=sensor_name,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=f"One run of {job.name} per new or rewritten {pattern} in {root}.",
    )
    def _landing(context: SensorEvaluationContext) -> SensorResult:
        seen = _read_cursor(context.cursor, sensor_name)
        present = _scan(root, pattern, sensor_name)
        requests: list[RunRequest] = []
        waiting: list[str] = []
        loaded: list[str] = []
        for file_name, (mtime_ns, size) in sorted(present.items()):
            if seen.get(file_name) == (mtime_ns, size):
                continue
            key = key_of(file_name)
            if key is None or not _is_partition(partitions_def, key, context.instance):
                waiting.append(file_name)
            elif _loaded_since(context.instance, asset_keys, key, mtime_ns):
                loaded.append(file_name)
            else:
                requests.append(
                    RunRequest(
                        partition_key=key,
                        run_key=f"{file_name}:{mtime_ns}:{size}",
                        tags={LANDING_FILE_TAG: str(root / file_name)},
                    )
                )
        cursor = _write_cursor({n: v for n, v in present.items() if n not in waiting})
        notes = []
        if waiting:
            notes.append(f"{len(waiting)} file(s) give no partition of {job.name} yet: {waiting}")
        if loaded:
            notes.append(f"{len(loaded)} file(s) were loaded by runs started after they landed")
        if requests:
            requests.sort(key=lambda r: (r.partition_key, r.run_key))
            asked = [f"{r.partition_key} ({Path(r.tags[LANDING_FILE_TAG]).name})" for r in requests]
            more = f" and {len(asked) - 20} more" if len(asked) > 20 else ""
            notes.append(f"runs of {job.name} for {', '.join(asked[:20])}{more}")
            for note in notes:
                context.log.info(note)
            return SensorResult(run_requests=requests, cursor=cursor)
        return SensorResult(skip_reason="; ".join(notes) or "No new files.", cursor=cursor)

    return _landing


def _key_function(partition_key: str | Callable[[str], str | None]) -> Callable[[str], str | None]:
    if callable(partition_key):
        return partition_key
    try:
        regex = re.compile(partition_key)
    except re.error as error:
        raise ConfigurationError(
            f"landing_sensor partition_key {partition_key!r} is not a valid regex: {error}"
        ) from error

    def from_name(file_name: str) -> str | None:
        match = regex.search(file_name)
        if match is None:
            return None
        return match.group(1) if regex.groups else match.group(0)

    return from_name


def _shared_partitions(assets_defs: Sequence[AssetsDefinition]) -> PartitionsDefinition:
    """The one partitions definition of `assets_defs`: a file gives one partition of them all."""
    if not assets_defs:
        raise ConfigurationError("landing_sensor needs assets to run: pass assets=[...].")
    by_def: dict[PartitionsDefinition, list[str]] = {}
    for assets_def in assets_defs:
        if not isinstance(assets_def, AssetsDefinition) or not assets_def.keys:
            raise ConfigurationError(
                "landing_sensor assets= takes the assets themselves (what @asset returns), "
                f"whose keys and partitions it reads, not {assets_def!r}."
            )
        labels = sorted("/".join(key.path) for key in assets_def.keys)
        if (partitions_def := assets_def.partitions_def) is None:
            raise ConfigurationError(
                f"landing_sensor runs one partition per file, but {', '.join(labels)} has no "
                "partitions: give it a partitions_def (e.g. DailyPartitionsDefinition), or "
                "run it from a sensor of its own."
            )
        by_def.setdefault(partitions_def, []).extend(labels)
    if len(by_def) > 1:
        each = "; ".join(f"{', '.join(labels)}: {pdef!r}" for pdef, labels in by_def.items())
        raise ConfigurationError(
            "landing_sensor runs one partition per file, so its assets must share one "
            f"partitions definition, but {each}. Give them the same partitions_def, or "
            "give each its own landing_sensor."
        )
    (partitions_def,) = by_def
    return partitions_def


def _loaded_since(
    instance: DagsterInstance, asset_keys: AbstractSet[AssetKey], key: str, mtime_ns: int
) -> bool:
    """Whether every asset has partition `key` from a run started after `mtime_ns`.

    So a backfill that ran after files landed is not repeated when the sensor starts.
    """
    for asset_key in asset_keys:
        latest = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=asset_key, asset_partitions=[key]), limit=1
        ).records
        run = instance.get_run_record_by_id(latest[0].run_id) if latest else None
        if run is None or run.start_time is None or run.start_time * 1e9 < mtime_ns:
            return False
    return True


def _is_partition(
    partitions_def: PartitionsDefinition, key: str, instance: DagsterInstance
) -> bool:
    """Whether `key` is a partition now (a dynamic one: added to the instance)."""
    if isinstance(partitions_def, DynamicPartitionsDefinition) and partitions_def.name:
        return instance.has_dynamic_partition(partitions_def.name, key)
    return partitions_def.has_partition_key(key)


def _scan(root: Path, pattern: str, sensor_name: str) -> dict[str, Version]:
    """Version of each regular file in `root` whose name matches `pattern`."""
    if not root.is_dir():
        raise ConfigurationError(
            f"Landing directory {root.absolute()} of sensor {sensor_name} "
            f"{'is not a directory' if root.exists() else 'does not exist'}: create it, or "
            "point landing_sensor(directory=...) at the folder files land in."
        )
    found: dict[str, Version] = {}
    with os.scandir(root) as entries:
        for entry in entries:
            if not fnmatch.fnmatchcase(entry.name, pattern):
                continue
            try:
                if not entry.is_file():
                    continue
                stat = entry.stat()
            except FileNotFoundError:  # removed between listing and stat
                continue
            found[entry.name] = (stat.st_mtime_ns, stat.st_size)
    return found


def _read_cursor(cursor: str | None, sensor_name: str) -> dict[str, Version]:
    if not cursor:
        return {}
    try:
        return CURSOR.from_text(cursor, f"The cursor of sensor {sensor_name}")
    except UnknownFormatVersionError:
        raise
    except CorruptFileError as error:
        raise ConfigurationError(
            f"The cursor of sensor {sensor_name} is not a landing_sensor cursor "
            f"({cursor[:80]!r}). Clear it (UI: sensor > Set cursor, empty) to consider "
            "every file again; run keys keep launched files from running twice."
        ) from error


def _write_cursor(files: dict[str, Version]) -> str:
    return json.dumps(CURSOR.to_json(files), separators=(",", ":"))


def _cursor_files(f: Fields) -> dict[str, Version]:
    files = f.take("files", dict)
    for name, seen in files.items():
        if not (isinstance(seen, list) and len(seen) == 2 and all(type(x) is int for x in seen)):
            raise FieldError(f"field 'files.{name}' is {seen!r}, not [mtime_ns, size]")
    return {name: (m, s) for name, (m, s) in files.items()}


#: The cursor: each file seen, as (mtime_ns, size). Version 1 spelled its version `v`.
CURSOR = SavedFormat(
    _CURSOR_VERSION,
    _cursor_files,
    lambda files: {"files": {n: list(v) for n, v in sorted(files.items())}},
    "Clear it to consider every file again.",
    unversioned=None,
    key="v",  # as every earlier release reads it
)
