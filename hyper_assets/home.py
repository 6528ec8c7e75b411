"""The extract's home: where the `.hyper` file, its outbox and its publish state live.

`database` is a local path (the default, as it always was), or a URI of a store. A URI
whose store this library cannot serve is an `UnsupportedHomeError` when the IO manager is
defined: it is never taken as a relative local path (`s3://b/x.hyper` would otherwise
become `./s3:/b/x.hyper`, and every row written would die with the container).
"""

from __future__ import annotations

import re
from pathlib import Path

from hyper_assets.errors import UnsupportedHomeError

#: `scheme:` at the start of a URI (RFC 3986); one letter would be a Windows drive.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")


def parse_home(database: str) -> Path:
    """`database` as the local path of the file; a URI is an `UnsupportedHomeError`."""
    found = _SCHEME.match(database)
    if found:
        raise UnsupportedHomeError(
            f"database={database!r} names a {found.group(1)}:// store, which HyperIOManager "
            "cannot keep the file in yet; it would otherwise be taken as a local path, "
            "and every write would die with the container. Give a path on a disk every "
            "run reaches, or './' before a file name that holds a colon."
        )
    return Path(database)


def relative_to(database: str, root: Path) -> str:
    """`database` as given relative to `root` (a project's): a path joined to it."""
    return str(root / parse_home(database))
