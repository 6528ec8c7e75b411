"""Every shell block of the README and docs/ can be pasted: bash parses it, and no command
continued with backslashes has a comment before its last line (the comment ends the
command there, and the lines after it run as commands of their own)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(bash|sh|shell)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
#: A comment: `#` at the start of a word.
COMMENT = re.compile(r"(?:^|\s)#")


def comments_inside_a_command(block: str) -> list[str]:
    """The lines whose comment cuts a backslash-continued command short: a backslash then
    a comment on one line (`... \\ # why`: the backslash escapes the space), or a comment
    on a continued line that the next, indented line was meant to continue."""
    lines = block.splitlines()
    bad = []
    for i, line in enumerate(lines):
        continued = i > 0 and lines[i - 1].rstrip().endswith("\\")
        more = i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t") and lines[i + 1].strip()
        if re.search(r"\\[ \t]+#", line) or (continued and COMMENT.search(line) and more):
            bad.append(line)
    return bad


def shell_blocks() -> list[tuple[str, str]]:
    blocks = []
    for doc in DOCS:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            line = text[: match.start()].count("\n") + 1
            blocks.append((f"{doc.relative_to(ROOT)}:{line}", match.group(2)))
    return blocks


BLOCKS = shell_blocks()


def test_the_docs_have_shell_blocks():
    assert len(BLOCKS) >= 10, BLOCKS
    assert any(where.startswith("README.md:") for where, _ in BLOCKS)


@pytest.mark.parametrize(("where", "block"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_a_shell_block_parses(where: str, block: str):
    checked = subprocess.run(
        ["bash", "-n"], input=block, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, f"{where}: {checked.stderr}"


@pytest.mark.parametrize(("where", "block"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_no_comment_cuts_a_command_short(where: str, block: str):
    bad = comments_inside_a_command(block)
    assert not bad, f"{where}: a comment inside a backslash-continued command: {bad}"


def test_the_check_finds_a_comment_inside_a_command():
    """docs/emulator.md's start command had this shape, which bash parses: pasted, the
    first comment ended the command, and `--site sales` ran as a command of its own."""
    was = (
        "python -m hyper_assets.emulator --port 8080 --data-dir ./tableau-data \\\n"
        "    --token ci=s3cret            # repeatable\n"
        "    --site sales                 # repeatable: sites besides the default site\n"
    )
    assert comments_inside_a_command(was) == ["    --token ci=s3cret            # repeatable"]
    assert comments_inside_a_command("run --a 1 \\ # why\n    --b 2\n") == ["run --a 1 \\ # why"]
    last_line = "run --a 1 \\\n    --b 2   # why\nnext --c 3\n"
    assert comments_inside_a_command(last_line) == []
