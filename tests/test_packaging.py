"""The lowest-versions run (`make test-lowest`) installs what pyproject.toml allows at least."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.version import Version

import hyper_assets

ROOT = Path(__file__).parent.parent


def test_lowest_constraints_are_the_declared_lower_bounds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["spark"]
    lower = {}
    for requirement in declared:
        name, bound = re.fullmatch(r"([\w-]+)(?:\[[\w,]+\])?>=([\w.]+).*", requirement).groups()
        lower[name] = Version(bound)
    pins = (ROOT / "constraints-lowest.txt").read_text().splitlines()
    pinned = {
        name: Version(version)
        for name, version in (p.split("==") for p in pins if p and not p.startswith("#"))
    }
    assert pinned == lower


def test_the_version_is_pyprojects():
    """`hyper_assets.__version__` is read from the installed metadata, which is pyproject's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert hyper_assets.__version__ == project["version"]
