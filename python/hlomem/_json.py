"""Attribute access over hlomem's JSON output.

The JSON contract is defined once, in Rust (``src/schema.rs``), and
published as JSON Schemas (``hlomem schema analyze``, ``schema/*.schema.json``).
This module does not copy it: a :class:`JsonObject` exposes whatever fields
the JSON has, so a field added to the report (a new finding's evidence, a
breakdown of the peak) is reachable the day the binary writes it. The typed
subclasses in :mod:`hlomem._model` only *declare* the main fields, for type
checkers, editors and documentation; ``tests/python/test_schema.py`` checks
each declaration against the schema.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

__all__ = ["JsonObject"]


class JsonObject:
    """One JSON object of hlomem's output, read with attribute access.

    ``obj.field`` is the JSON's ``"field"``: nested objects come back as
    :class:`JsonObject` (the typed subclass where the class declares the
    field), arrays as lists, numbers as exact ``int``. A declared list or
    ``| None`` field that the JSON leaves out (it omits some empty ones)
    reads as ``[]`` or ``None``. ``obj["field"]`` works
    too, for names that are not identifiers; :meth:`to_json` gives the plain
    data. Objects are read-only views of the JSON they were made from.
    """

    __slots__ = ("_data",)

    #: The JSON Schema this class mirrors: (document, definition), the
    #: definition ``""`` for the document's root. ``None``: any object.
    _schema: ClassVar[tuple[str, str] | None] = None

    def __init__(self, data: Mapping[str, Any]) -> None:
        if not isinstance(data, Mapping):
            raise TypeError(f"{type(self).__name__} wraps a JSON object, not {type(data).__name__}")
        self._data = data

    def __getattr__(self, name: str) -> Any:
        # Dunder and private names are Python's (copy, pickle and Jupyter probe
        # `_repr_html_` and others); JSON fields never start with `_`.
        if name.startswith("_"):
            raise AttributeError(name)
        hint = _field_types(type(self)).get(name)
        try:
            value = self._data[name]
        except KeyError:
            # The JSON leaves out empty lists and nulls of some fields; a
            # declared field reads as its empty value then.
            if hint is not None and _is_list(hint):
                return []
            if hint is not None and _is_union(hint) and type(None) in typing.get_args(hint):
                return None
            fields = ", ".join(sorted(self._data)) or "none"
            raise AttributeError(
                f"{type(self).__name__} has no field {name!r} (fields: {fields})"
            ) from None
        return _wrap(value, hint)

    def __getitem__(self, name: str) -> Any:
        return _wrap(self._data[name], _field_types(type(self)).get(name))

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __iter__(self) -> Iterator[str]:
        """The field names, as a dict iterates its keys."""
        return iter(self._data)

    def __dir__(self) -> list[str]:
        # Tab completion in notebooks and shells lists the JSON's fields.
        return sorted(set(super().__dir__()) | set(self._data))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JsonObject):
            return self._data == other._data
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a view of mutable data

    def __repr__(self) -> str:
        shown = []
        for key, value in self._data.items():
            if isinstance(value, (dict, list)):
                value = "{...}" if isinstance(value, dict) else f"[{len(value)} items]"
            else:
                value = repr(value)
            shown.append(f"{key}={value}")
            if len(shown) == 6:
                shown.append("...")
                break
        return f"{type(self).__name__}({', '.join(shown)})"

    def to_json(self) -> dict[str, Any]:
        """The JSON object as plain dicts, lists, strings and numbers."""
        return dict(self._data)


_FIELD_TYPES: dict[type, dict[str, Any]] = {}


def _field_types(cls: type) -> dict[str, Any]:
    """The fields `cls` declares, with their types resolved (class variables
    and private names left out); resolved once per class."""
    fields = _FIELD_TYPES.get(cls)
    if fields is None:
        fields = {
            name: hint
            for name, hint in typing.get_type_hints(cls).items()
            if not name.startswith("_") and typing.get_origin(hint) is not ClassVar
        }
        _FIELD_TYPES[cls] = fields
    return fields


def _is_list(hint: Any) -> bool:
    """`list[X]`, or `list[X] | None`."""
    return _item_hint(hint) is not None


def _is_union(hint: Any) -> bool:
    """`X | Y` and `Optional[X]` (two spellings, two origins at run time)."""
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _object_class(hint: Any) -> type | None:
    """The JsonObject class a declared type asks for, looking through `X | None`."""
    if isinstance(hint, type) and issubclass(hint, JsonObject):
        return hint
    if _is_union(hint):
        for arg in typing.get_args(hint):
            found = _object_class(arg)
            if found is not None:
                return found
    return None


def _item_hint(hint: Any) -> Any:
    """The item type of a declared `list[X]` (or `list[X] | None`), else None."""
    if _is_union(hint):
        for arg in typing.get_args(hint):
            item = _item_hint(arg)
            if item is not None:
                return item
        return None
    if typing.get_origin(hint) is list:
        args = typing.get_args(hint)
        return args[0] if args else None
    return None


def _wrap(value: Any, hint: Any = None) -> Any:
    """A JSON value as the API returns it: objects wrapped (in the declared
    class, else :class:`JsonObject`), arrays wrapped item by item."""
    if isinstance(value, Mapping):
        return (_object_class(hint) or JsonObject)(value)
    if isinstance(value, list):
        item = _item_hint(hint)
        return [_wrap(v, item) for v in value]
    return value
