"""One error tree: drawn at the top of errors.py, exported, and none from the emulator."""

from __future__ import annotations

import inspect
import re

import hyper_assets
from hyper_assets import errors
from hyper_assets.emulator.errors import RestApiError

CLASSES = {
    name: cls
    for name, cls in vars(errors).items()
    if inspect.isclass(cls) and cls.__module__ == errors.__name__
}


def test_the_drawing_is_the_tree():
    """Each class appears in the docstring's drawing under its own base class."""
    drawn: dict[str, str] = {}
    parents: list[tuple[int, str]] = []
    for line in errors.__doc__.splitlines():
        match = re.match(r"^([│ ├└─]*)(\w+Error)\b", line)
        if not match:
            continue
        depth = len(match.group(1)) // 4
        parents = [(d, n) for d, n in parents if d < depth]
        drawn[match.group(2)] = parents[-1][1] if parents else "Exception"
        parents.append((depth, match.group(2)))
    actual = {name: cls.__bases__[0].__name__ for name, cls in CLASSES.items()}
    assert drawn == actual


def test_every_error_is_exported_and_no_client_error_is_the_emulators():
    for name, cls in CLASSES.items():
        assert getattr(hyper_assets, name) is cls
        assert issubclass(cls, errors.HyperAssetsError)
        assert not issubclass(cls, RestApiError)
    assert issubclass(errors.TableauJobTimeoutError, errors.TableauError)
