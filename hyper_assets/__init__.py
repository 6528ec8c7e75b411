"""hyper-assets: Tableau .hyper extracts as Dagster assets, from Spark or Python frames.

The public surface is `__all__` (docs/api.md, "Public API"): import from here. Other modules
are internal, except `hyper_assets.emulator` (the Tableau REST emulator) and
`hyper_assets.tableau.actions` (the action batches `update_data` sends).
"""

from importlib.metadata import PackageNotFoundError, version as _version
from importlib.util import find_spec as _find_spec

import lazy_loader

try:
    __version__ = _version("hyper-assets")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

# Each public name is imported from its module when first used, as `__init__.pyi` lists
# them: `python -m hyper_assets.emulator` and `import hyper_assets.errors` start without
# Spark or Dagster.
__getattr__, _names, __all__ = lazy_loader.attach_stub(__name__, __file__)


def __dir__() -> list[str]:
    """The public names, less HyperExtractComponent where dagster-pyspark is not installed:
    Dagster's component discovery (`dg list components`, a components project's load)
    gets every name `dir()` lists, and would fail on the one that cannot be imported."""
    names = _names()
    try:
        spark = _find_spec("dagster_pyspark") is not None
    except (ImportError, ValueError):  # a module blocked in sys.modules, or a broken one
        spark = False
    return names if spark else [n for n in names if n != "HyperExtractComponent"]
