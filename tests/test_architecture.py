"""ARCHITECTURE.md matches the tree: its layers are import-linter's, in order, every
package is in them, and every module it names exists."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "hyper_assets"
TEXT = (ROOT / "ARCHITECTURE.md").read_text()


def diagram_layers() -> list[str]:
    """The diagram's lines down to `errors`, each as import-linter writes a layer."""
    block = TEXT.split("```\n", 2)[1]
    layers = []
    for line in block.splitlines():
        names = re.match(r"([\w.]+(?: \| [\w.]+)*)\s{2,}", line)
        if names:
            layers.append(" | ".join(f"hyper_assets.{n}" for n in names[1].split(" | ")))
        if line.startswith("errors"):
            return layers
    raise AssertionError("the diagram has no `errors` line")


def test_the_layers_are_the_import_contracts():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    assert diagram_layers() == contract["layers"]


def test_every_package_is_in_a_layer():
    packages = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in PACKAGE.rglob("__init__.py")
        if p.parent not in (PACKAGE, PACKAGE / "tableau")
    }
    layered = {n for layer in diagram_layers() for n in layer.split(" | ")}
    assert packages - {"hyper_assets.emulator"} <= layered
    assert "emulator" in TEXT.split("```\n", 2)[1]


def test_every_module_it_names_exists():
    named = set(re.findall(r"`((?:[\w/]+/)?\w+\.py)`", TEXT))
    files = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    missing = {n for n in named if n not in files and not any(f.endswith("/" + n) for f in files)}
    assert named and not missing, missing


def test_dagsters_private_api_is_reached_from_the_compatibility_module_alone():
    private = re.compile(r"dagster\._|\.step_context\b|event_log_storage")
    reached = {
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if private.search(p.read_text())
    }
    assert reached == {"_dagster/compat.py"}
