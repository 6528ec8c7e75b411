"""Writes the bytecode of the modules the suites' processes import, once, as `make`
builds an environment.

`make` lets Python write bytecode where a module is first imported, even where
PYTHONDONTWRITEBYTECODE is set (as in our CI), rather than compiling every module at
install: `uv pip install --compile-bytecode` took 36 of .venv's 68 CPU s to compile some
14,000 files, of which the suites import about 3,000. Without this, the suites' first
dozen processes, started together, would each compile dagster (and pyspark) at once.
A module missing from an environment (pyspark from the no-pyspark one), or a public name
that needs one (`MissingDependencyError`), is passed over; compilers' warnings about
dependencies' sources (a SyntaxWarning for an escape) are not shown.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from contextlib import suppress

import hyper_assets
from hyper_assets.errors import MissingDependencyError

#: What the test workers import as they start, and the servers and CLIs the tests run.
MODULES = (
    "pytest",
    "xdist",
    "hypothesis",
    "dagster",
    "dagster_pyspark",
    "dagster_tableau",
    "dagster_webserver",
    "dagster_graphql",
    "dagster_dg_cli.cli",
    "pyspark.sql",
    "pyspark.sql.connect.session",
    "pandas",
    "polars",
    "pyarrow",
    "moto.server",
    "hyper_assets.emulator",
    "hyper_assets.tableau",
)


def main() -> None:
    warnings.simplefilter("ignore")
    for name in MODULES:
        if importlib.util.find_spec(name.split(".")[0]) is not None:
            importlib.import_module(name)
    for name in hyper_assets.__all__:  # its lazy re-exports, each from its own module
        with suppress(MissingDependencyError):
            getattr(hyper_assets, name)


if __name__ == "__main__":
    main()
