"""`make_equal`, which brings a publish's early copy of the file up to date under the lock."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hyper_assets._base.files import make_equal

CHUNK = 8
RANDOM = random.Random(7)
SOURCE = bytes(RANDOM.randrange(256) for _ in range(5 * CHUNK + 3))


def _flip(data: bytes, *offsets: int) -> bytes:
    changed = bytearray(data)
    for offset in offsets:
        changed[offset] ^= 0xFF
    return bytes(changed)


@pytest.mark.parametrize(
    ("copy", "source", "written"),
    [
        (SOURCE, SOURCE, 0),
        (_flip(SOURCE, 0), SOURCE, CHUNK),  # one chunk differs
        (_flip(SOURCE, CHUNK - 1, CHUNK), SOURCE, 2 * CHUNK),  # either side of a boundary
        (_flip(SOURCE, len(SOURCE) - 1), SOURCE, 3),  # the last, short chunk
        (SOURCE[: 2 * CHUNK], SOURCE, 3 * CHUNK + 3),  # the source grew
        (SOURCE + b"left over", SOURCE, 3),  # shrank: its short last chunk again, the rest cut
        (SOURCE[: 2 * CHUNK + 1], SOURCE, 3 * CHUNK + 3),  # grew inside a chunk
        (SOURCE, b"", 0),  # the source is empty
        (b"", SOURCE, len(SOURCE)),  # the copy is empty
    ],
    ids=[
        "same",
        "one chunk",
        "boundary",
        "last chunk",
        "grew",
        "shrank",
        "grew in",
        "empty",
        "new",
    ],
)
def test_the_copy_ends_equal_to_the_source_writing_only_the_chunks_that_differ(
    tmp_path: Path, copy: bytes, source: bytes, written: int
) -> None:
    (tmp_path / "copy").write_bytes(copy)
    (tmp_path / "source").write_bytes(source)
    assert make_equal(tmp_path / "copy", tmp_path / "source", chunk=CHUNK) == written
    assert (tmp_path / "copy").read_bytes() == source
