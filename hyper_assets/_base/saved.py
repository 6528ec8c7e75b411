"""Saved formats: the JSON that hyper-assets writes and reads back, each in one shared way.

A `SavedFormat` is one such file (or record, or sensor cursor): `dump` lists the fields it
writes, and `parse` takes them back one by one from `Fields`, each by name and type; a
field it does not take is refused, so a file with a field this library does not know is
never half read. Every one is written with its version first, spelled `format_version`,
except where a reader of an earlier release would take that spelling for a corrupt file
(the home's manifests keep `format`, the landing sensor's cursor `v`: a worker not yet
upgraded must not advise restoring a good generation); `older_keys` are the spellings
earlier versions wrote (still read), and a file without a version is of version
`unversioned`. A version this library does not read raises
`UnknownFormatVersionError`; anything else wrong, `CorruptFileError` naming the file and
the field, with the format's way out.

The golden files of tests/golden/ pin each format and version.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from hyper_assets._base.files import write_json
from hyper_assets.errors import CorruptFileError, UnknownFormatVersionError

T = TypeVar("T")
U = TypeVar("U")

#: How every format written today spells its version, but two (see above).
VERSION_KEY = "format_version"


class FieldError(ValueError):
    """A field that is missing, of the wrong type, or not known; the message names it."""


class _NewerVersion(Exception):
    """A version this library does not read (turned into `UnknownFormatVersionError`)."""

    def __init__(self, version: object, reads: tuple[int, ...], name: str) -> None:
        super().__init__(version)
        self.version, self.reads, self.name = version, reads, name


class _Missing:
    pass


#: No default: the field is required.
REQUIRED: Any = _Missing()
_KINDS = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}


class Fields:
    """One JSON object of a saved file, taken field by field (`SavedFormat.parse`)."""

    def __init__(self, body: object, name: str, version: int) -> None:
        if not isinstance(body, dict):
            raise FieldError(f"{_label(name)} is not a JSON object")
        self._body: dict[str, Any] = body
        self.where, self.version = name, version  # where: the field it is (the file: "")
        self._taken: set[str] = set()

    def name(self, key: str) -> str:
        """How messages name field `key` of this object: with the fields it is within."""
        return f"{self.where}.{key}" if self.where else key

    def has(self, key: str) -> bool:
        return key in self._body

    def absent(self, key: str) -> bool:
        """Whether `key` is missing or null (it counts as taken)."""
        self._taken.add(key)
        return self._body.get(key) is None

    def take(self, key: str, kind: type[T], default: T = REQUIRED) -> T:
        """Field `key`, of JSON type `kind` (str, int, float, bool, list, dict); `default`
        when missing (required without one)."""
        self._taken.add(key)
        if key not in self._body:
            if default is REQUIRED:
                raise FieldError(f"field '{self.name(key)}' is missing")
            return default
        value = self._body[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            what = _KINDS.get(kind, f"a JSON {'object' if kind is dict else 'array'}")
            raise FieldError(f"field '{self.name(key)}' is {value!r}, not {what}")
        return value

    def optional(self, key: str, kind: type[T]) -> T | None:
        """Field `key` of JSON type `kind`, or None when it is missing or null."""
        return None if self.absent(key) else self.take(key, kind)

    def strings(self, key: str, default: tuple[str, ...] = REQUIRED) -> tuple[str, ...]:
        """Field `key`, a list of strings."""
        values = self.take(key, list, REQUIRED if default is REQUIRED else list(default))
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise FieldError(f"field '{self.name(key)}[{i}]' is {value!r}, not a string")
        return tuple(values)

    def nested(self, key: str, parse: Callable[[Fields], U]) -> U:
        """Field `key`, an object, as `parse` takes it."""
        return _within(self.take(key, dict), self.name(key), self.version, parse)

    def each(
        self, key: str, parse: Callable[[Fields], U], default: tuple[U, ...] = REQUIRED
    ) -> tuple[U, ...]:
        """Field `key`, a list of objects, each as `parse` takes it."""
        if default is not REQUIRED and not self.has(key):
            self._taken.add(key)
            return default
        items = self.take(key, list)
        return tuple(
            _within(x, f"{self.name(key)}[{i}]", self.version, parse) for i, x in enumerate(items)
        )

    def named(
        self, key: str, parse: Callable[[Fields], U], default: Any = REQUIRED
    ) -> dict[str, U]:
        """Field `key`, an object of objects, each as `parse` takes it."""
        items = self.take(key, dict, default)
        return {
            k: _within(v, f"{self.name(key)}.{k}", self.version, parse) for k, v in items.items()
        }

    def close(self) -> None:
        """Refuses the fields nothing took: they are not this format's."""
        unknown = sorted(set(self._body) - self._taken)
        if unknown:
            raise FieldError(
                f"field '{self.name(unknown[0])}' is not a field of this format version"
            )


@dataclass(frozen=True)
class SavedFormat(Generic[T]):
    """One saved format: the version written, how it is parsed and dumped, what to do
    about a file that cannot be read, and which earlier files it still reads."""

    version: int
    parse: Callable[[Fields], T]  # takes every field it knows
    dump: Callable[[T], dict[str, Any]]  # every field but the version
    way_out: str
    reads: tuple[int, ...] = ()  # the versions read (none said: `version` only)
    older_keys: tuple[str, ...] = ()  # how earlier versions spelled `key`
    unversioned: int | None = 1  # the version of a file without one (None: refused)
    key: str = VERSION_KEY  # how the version is spelled (see the module's docstring)

    def to_json(self, value: T) -> dict[str, Any]:
        return {self.key: self.version, **self.dump(value)}

    def take(self, fields: Fields) -> T:
        """The value `fields` hold, their version checked (the caller closes them)."""
        keys = [k for k in (self.key, *self.older_keys) if fields.has(k)]
        version: object = self.unversioned
        if keys:
            version = fields.take(keys[0], object)
        elif version is None:
            raise FieldError(f"field '{fields.name(self.key)}' is missing")
        reads = self.reads or (self.version,)
        if not isinstance(version, int) or isinstance(version, bool) or version not in reads:
            raise _NewerVersion(version, reads, fields.where)
        fields.version = version
        return self.parse(fields)

    def from_json(self, body: object, where: str, way_out: str | None = None) -> T:
        """The value of JSON `body`, read from `where`.

        Raises `UnknownFormatVersionError` for a version this library does not read, and
        `CorruptFileError` naming `where` and the field for anything else, ending with
        `way_out` (the format's own unless given).
        """
        try:
            return _within(body, "", 0, self.take)
        except _NewerVersion as newer:
            field = f" (in field '{newer.name}')" if newer.name else ""
            versions = ", ".join(map(str, newer.reads))
            raise UnknownFormatVersionError(
                f"{where} has format version {newer.version!r}{field}, and this version of "
                f"hyper-assets reads version{'s' if len(newer.reads) > 1 else ''} {versions} "
                "only; nothing was changed. It was written by a newer hyper-assets: upgrade "
                "this one to that version."
            ) from None
        except (ValueError, KeyError, TypeError) as error:
            why = (
                str(error) if isinstance(error, FieldError) else f"{type(error).__name__}: {error}"
            )
            raise CorruptFileError(
                f"{where} cannot be read ({why}); nothing was changed. "
                f"{self.way_out if way_out is None else way_out}"
            ) from error

    def from_text(self, text: str | bytes, where: str, way_out: str | None = None) -> T:
        """`from_json` of the JSON text `text`; text that is not JSON is corrupt too."""
        try:
            body = json.loads(text)
        except ValueError as error:
            raise CorruptFileError(
                f"{where} cannot be read ({type(error).__name__}: {error}); nothing was "
                f"changed. {self.way_out if way_out is None else way_out}"
            ) from error
        return self.from_json(body, where, way_out)

    def read(self, path: Path, way_out: str | None = None) -> T:
        """The value saved at `path` (`from_json`); bytes that are not text are corrupt too
        (read as bytes: a decoding error is `CorruptFileError`, not `UnicodeDecodeError`)."""
        return self.from_text(path.read_bytes(), str(path), way_out)

    def write(self, path: Path, value: T, *, durable: bool = True) -> None:
        """Saves `value` at `path`, atomically and (unless not `durable`) durably
        (`write_json`)."""
        write_json(path, self.to_json(value), durable=durable)


def _within(body: object, name: str, version: int, parse: Callable[[Fields], U]) -> U:
    """`parse` of the object `body` (field `name`), refusing the fields it left."""
    fields = Fields(body, name, version)
    value = parse(fields)
    fields.close()
    return value


def _label(name: str) -> str:
    return f"field '{name}'" if name else "the file"
