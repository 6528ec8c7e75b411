"""Downloaded files: written to disk within a byte limit, and a `.tdsx`'s `.hyper` taken out."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

from hyper_assets.errors import TableauError

CHUNK_BYTES = 1 << 20  # what an unzipped .hyper is read in


def save_within(chunks: Iterator[bytes], path: Path, max_bytes: int, call: str) -> None:
    """Write `chunks` to `path`, refusing past `max_bytes`."""
    size = 0
    with path.open("wb") as out:
        for chunk in chunks:
            size += len(chunk)
            if size > max_bytes:
                raise TableauError(
                    f"Tableau {call}: the file is larger than {max_bytes} bytes; not downloaded."
                )
            out.write(chunk)


def extract_hyper(download: Path, hyper: Path, max_bytes: int, call: str) -> Path:
    """The `.hyper` file at `hyper`: `download` itself, or the one the `.tdsx` zip holds."""
    if not zipfile.is_zipfile(download):
        return download.replace(hyper)
    with zipfile.ZipFile(download) as tdsx:
        members = [m for m in tdsx.infolist() if m.filename.lower().endswith(".hyper")]
        if len(members) != 1:
            raise TableauError(f"Tableau {call}: the .tdsx holds {len(members)} .hyper files.")
        with tdsx.open(members[0]) as source:
            save_within(iter(lambda: source.read(CHUNK_BYTES), b""), hyper, max_bytes, call)
    download.unlink()
    return hyper
