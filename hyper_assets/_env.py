"""Internal: a setting that may be a `dagster.EnvVar`, read as its value."""

from __future__ import annotations

from typing import overload

from dagster import EnvVar

from hyper_assets.errors import ConfigurationError


@overload
def plain(setting: str, what: str) -> str: ...
@overload
def plain(setting: str | None, what: str) -> str | None: ...
def plain(setting: str | None, what: str) -> str | None:
    """The setting's value; an `EnvVar` used outside a Dagster run is read from the
    environment (the error names the variable, never a value)."""
    if not isinstance(setting, EnvVar):
        return setting
    if not (value := setting.get_value()):
        raise ConfigurationError(
            f"The environment variable {setting.env_var_name} ({what}) is not set."
        )
    return value
