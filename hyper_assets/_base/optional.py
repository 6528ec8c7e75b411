"""Internal: the optional packages, imported when first needed.

Spark is optional: `pip install hyper-assets` serves Python frames, the checks, the publish
and the emulator; `hyper-assets[spark]` adds pyspark and dagster-pyspark, and
`hyper-assets[tableau]` dagster-tableau, for `tableau_translator`. Any module that
answers to `import pyspark` will do (pyspark, pyspark-client, databricks-connect's), so
nothing here names a distribution. A package that cannot be imported is a
`MissingDependencyError` saying what needed it, why the import failed and what to install.
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

from hyper_assets.errors import MissingDependencyError

# PySpark warns that it "does not yet fully support pandas >= 3.0.0" when a session starts
# (SparkContext imports pyspark.testing.utils, which checks pandas) and when the Connect
# client is imported: pandas is not used at either place, by this library or by the
# caller. Only those two places are silenced, here, where the IO manager's import runs it
# before any session starts; a call that does use pandas (toPandas, a pandas UDF) still
# warns.
warnings.filterwarnings(
    "ignore",
    "PySpark does not yet fully support pandas",
    FutureWarning,
    r"pyspark\.(testing\.utils|sql\.connect\.utils)$",
)

#: What to install for each optional package this library imports.
INSTALL = {
    "pyspark": "pip install 'hyper-assets[spark]' (or pyspark-client for Spark Connect, or "
    "databricks-connect, beside plain hyper-assets)",
    "dagster_pyspark": "pip install 'hyper-assets[spark]' (dagster-pyspark)",
    "dagster_tableau": "pip install 'hyper-assets[tableau]' (dagster-tableau)",
}


def require(module: str, needed_for: str) -> ModuleType:
    """`module`, imported; `MissingDependencyError` naming `needed_for` when it cannot be."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise missing(module, needed_for, error) from error


def missing(module: str, needed_for: str, error: ImportError) -> MissingDependencyError:
    """The error of `module`'s failed import (`error`, its real cause), which `needed_for`
    needed."""
    top = module.partition(".")[0]
    return MissingDependencyError(
        f"{needed_for} needs {top!r}, which cannot be imported here ({error}). "
        f"Install it: {INSTALL.get(top, f'pip install {top}')}."
    )
