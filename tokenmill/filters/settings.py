"""The thresholds of the built-in filters as settings: one frozen dataclass per filter, made
from the constructor parameters the filter lists in its ``settings`` (name -> description),
with the constructor's defaults (FineWeb's values). ``CleanSettings`` holds one of each
(``with_filter_settings``), so every threshold is a recipe setting and a launchpad field, and a
new built-in filter brings its own by listing them (see ``registry``)."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tokenmill.runtime.stage import setting


def filter_settings(cls: type, module: str) -> type:
    """The settings dataclass of a built-in filter class, `<Filter>Settings`, which `module`
    must hold under that name (a worker process unpickles settings by it)."""
    parameters = inspect.signature(cls.__init__).parameters
    hints = typing.get_type_hints(cls.__init__)
    fields = [
        (name, plain_type(hints[name]), setting(plain_value(parameters[name].default), about))
        for name, about in cls.settings.items()
    ]
    kind = dataclasses.make_dataclass(
        f"{cls.__name__}Settings",
        fields,
        frozen=True,
        namespace={
            "__post_init__": _normalized,
            "values": _values,
            "build": lambda self: cls(**self.values()),
            "filter_class": cls,
        },
    )
    kind.__module__ = module
    return kind


def plain_type(hint: Any) -> Any:
    """A type a recipe file and a launchpad form can hold: sequences become lists, pairs
    lists of two numbers."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return plain_type(next(a for a in args if a is not type(None))) | None
    if origin is tuple:
        return list[float]
    if origin in (Iterable, Sequence, list) and args:
        return list[plain_type(args[0])]
    return hint


def plain_value(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [plain_value(v) for v in value]
    return value


def _normalized(self) -> None:
    """Lists read from YAML or a run config, as the constructor defaults are; every number in
    range (see `check_range`)."""
    for field in dataclasses.fields(self):
        value = getattr(self, field.name)
        if isinstance(value, tuple | list):
            value = plain_value(value)
            object.__setattr__(self, field.name, value)
        default = field.default_factory() if field.default is dataclasses.MISSING else field.default
        check_range(field.name, value, default, field.name in self.filter_class.unbounded)


def _numbers(value: Any) -> list:
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, int | float) and not isinstance(value, bool) else []


def check_range(name: str, value: Any, default: Any, unbounded: bool = False) -> None:
    """A threshold is never negative, and one whose default (FineWeb's) is a fraction stays in
    [0, 1] unless ``unbounded`` (a ratio that can pass 1); in pairs such as `top_n_grams`
    ([[2, 0.2], ...]) the same holds of each number by its position."""
    if value is None or not _numbers(value):
        return  # (a value of the wrong type is its annotation's to refuse)
    numbers, defaults = _numbers(value), _numbers(default)
    for index, number in enumerate(numbers):
        like = defaults[index % len(defaults)] if defaults else None
        fraction = isinstance(like, float) and 0 < like < 1 and not unbounded
        if number < 0 or (fraction and number > 1):
            bounds = "[0, 1] (a fraction)" if fraction else "0 or more"
            raise ValueError(f"{name}: {value!r} is out of range: {bounds}")


def _values(self) -> dict[str, Any]:
    return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


def with_filter_settings(kinds: dict[str, type], after: str) -> Callable[[type], type]:
    """A class decorator, under ``@dataclass``: after the field ``after``, a field per filter
    (``kinds``: its settings dataclass by its name) named after it, holding its settings,
    FineWeb's values by default, described by the filter's ``description``."""

    def with_fields(cls: type) -> type:
        annotations = {}
        for name, hint in cls.__dict__["__annotations__"].items():
            annotations[name] = hint
            if name == after:
                for filter_name, kind in kinds.items():
                    annotations[filter_name] = kind
                    about = {"description": kind.filter_class.description}
                    setattr(
                        cls, filter_name, dataclasses.field(default_factory=kind, metadata=about)
                    )
        if after not in annotations:
            raise ValueError(f"{cls.__name__} has no field {after!r} to add the filters after")
        cls.__annotations__ = annotations
        return cls

    return with_fields


def from_value(kind: type, value: Any, where: str) -> Any:
    """A filter's settings from a recipe's or a run's mapping (missing keys keep FineWeb's
    values); an unknown key fails naming it and the known ones."""
    if isinstance(value, kind):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a mapping of settings, got {value!r}")
    known = [field.name for field in dataclasses.fields(kind)]
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown settings {unknown}; known: {known}")
    try:
        return kind(**value)
    except ValueError as error:
        raise ValueError(f"{where}.{error}") from None
