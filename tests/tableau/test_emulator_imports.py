"""The emulator judges the client, so it imports none of the client's judging code.

Until the project's import-linter contracts exist, this holds the rule: no module of
`hyper_assets.emulator` imports the Tableau client (`hyper_assets.tableau`) or the
client's catalog reading (`hyper_assets._engine.tables`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import hyper_assets.emulator

FORBIDDEN = ("hyper_assets.tableau", "hyper_assets._engine.tables")


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_emulator_module_imports_the_client() -> None:
    package = Path(hyper_assets.emulator.__file__).parent
    modules = sorted(package.glob("*.py"))
    assert len(modules) > 10
    offending = {
        f"{path.name}: {name}"
        for path in modules
        for name in imported(path)
        if any(name == f or name.startswith(f"{f}.") for f in FORBIDDEN)
    }
    assert not offending
