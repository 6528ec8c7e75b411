"""hyper-assets: Tableau .hyper extracts as Dagster assets, written from Spark.

The public surface is `__all__` (docs/api.md, "Public API"): import from here. Other modules
are internal, except `hyper_assets.emulator` (the Tableau REST emulator) and
`hyper_assets.tableau.actions` (the action batches `update_data` sends).
"""

from importlib.metadata import PackageNotFoundError, version as _version

import lazy_loader

try:
    __version__ = _version("hyper-assets")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

# Each public name is imported from its module when first used, as `__init__.pyi` lists
# them: `python -m hyper_assets.emulator` and `import hyper_assets.errors` start without
# Spark or Dagster.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
