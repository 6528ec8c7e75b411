"""Without pyspark: every public name but the component imports, Python frames round-trip,
and a Spark input is a named error saying what to install.

Each case runs in a fresh interpreter where `import pyspark` fails (as in make test's
no-Spark environment, .venv-nospark, where this module runs too), so that nothing this
process imported earlier hides an import of pyspark."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import hyper_assets

BLOCK = """
import sys
for name in ("pyspark", "py4j", "dagster_pyspark"):
    sys.modules[name] = None  # `import pyspark` fails, as where it is not installed
"""


def run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "case.py"
    script.write_text(BLOCK + textwrap.dedent(code))
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=300
    )


def test_every_public_name_imports_and_none_imports_pyspark(tmp_path):
    names = [n for n in hyper_assets.__all__ if n != "HyperExtractComponent"]
    done = run(
        f"""
        import hyper_assets, hyper_assets.emulator, hyper_assets.tableau.actions
        for name in {names!r}:
            getattr(hyper_assets, name)
        try:
            hyper_assets.HyperExtractComponent
        except hyper_assets.MissingDependencyError as error:
            print("component:", error)
        spark = [m for m, v in sys.modules.items() if m.startswith(("pyspark", "py4j")) and v]
        print("loaded:", sorted(spark))
        # Dagster's component discovery (dg list components) reads every name dir() lists.
        from dagster.components.core.package_entry import get_package_objects_in_module
        print("discovered:", [name for name, _ in get_package_objects_in_module(hyper_assets)])
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loaded: []" in done.stdout
    assert "discovered: []" in done.stdout  # the component left out, nothing failing
    assert "component: HyperExtractComponent needs 'dagster_pyspark'" in done.stdout
    assert "hyper-assets[spark]" in done.stdout


def test_python_frames_round_trip_and_an_unannotated_input_says_what_to_install(tmp_path):
    done = run(
        """
        import dagster as dg
        import pyarrow as pa
        from hyper_assets import HyperIOManager, MissingDependencyError

        @dg.asset(metadata={"primary_key": ["id"]})
        def items() -> pa.Table:
            return pa.table({"id": [1, 2], "name": ["a", None]})

        @dg.asset
        def typed(items: pa.Table) -> None:
            print("typed:", items.sort_by("id").to_pylist())

        @dg.asset
        def untyped(items) -> None:
            pass

        io = HyperIOManager(database=sys.argv[1] + "/frames.hyper")
        print("ran:", dg.materialize([items, typed], resources={"io_manager": io}).success)
        try:
            dg.materialize([items, untyped], selection=["untyped"], resources={"io_manager": io})
        except MissingDependencyError as error:
            print("untyped:", error)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ran: True" in done.stdout
    assert "typed: [{'id': 1, 'name': 'a'}, {'id': 2, 'name': None}]" in done.stdout
    untyped = next(line for line in done.stdout.splitlines() if line.startswith("untyped:"))
    assert "as a Spark DataFrame" in untyped and "items" in untyped
    assert "needs 'pyspark'" in untyped and "hyper-assets[spark]" in untyped
    assert "without a frame type" in untyped and "annotate the input pa.Table" in untyped
