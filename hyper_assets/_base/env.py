"""Internal: what config models share: settings that may be a `dagster.EnvVar`, read as
their value (`plain`) or not known yet (`from_env`); fields holding a secret
(`secret_field`); the fields a model was given away from their defaults (`changed`)."""

from __future__ import annotations

from typing import Any, overload

from dagster import EnvVar
from pydantic import BaseModel, Field

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


def secret_field(description: str, **field: Any) -> Any:
    """A config field holding a secret: marked secret for Dagster (its UI and run config
    hide it) and left out of `repr`. Give its value as `dagster.EnvVar`; read it with
    `plain`, and pass it only to the client that needs it."""
    return Field(
        repr=False, json_schema_extra={"dagster__is_secret": True}, description=description, **field
    )


def changed(model: BaseModel) -> list[str]:
    """The fields of `model` (whose fields all have defaults) that differ from them.

    Not the fields passed: when Dagster builds a resource for a run it passes nested
    settings back at their defaults, so a default value cannot tell "given" apart.
    """
    default = type(model)()
    fields = type(model).model_fields
    return [name for name in fields if getattr(model, name) != getattr(default, name)]


def from_env(data: Any, field: str) -> bool:
    """Whether a model's input `data` gives `field` as an `EnvVar`. Its value is known only
    when Dagster reads it for a run (and builds the model again, with the value); while
    the model is validated, pydantic shows the variable's name as the field's value."""
    return isinstance(data, dict) and isinstance(data.get(field), EnvVar)
