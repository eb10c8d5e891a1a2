"""The built-in filters, in the order they run: what every extraction measures and every
recipe configures. The rest derives from here when its module loads: ``BUILTIN_FILTERS``, the
extracted signal profile (``signals.EXTRACTED_SIGNALS``, so the extracted schema), the settings
dataclasses and ``CleanSettings``' field per filter (so the recipe model, the launchpad and the
settings reference), the chain a recipe builds, the preview and the rule histograms.

A new built-in filter is a module (a ``Filter`` subclass declaring its ``signals``,
``settings``, ``measure`` and ``rules``) and one line below; the language filter and the PII
masker are configured by ``CleanSettings`` itself. ``register`` also serves as a decorator, for
a filter defined elsewhere: it must run before ``tokenmill.stages`` loads.
"""

from __future__ import annotations

from tokenmill.filters.c4 import C4QualityFilter
from tokenmill.filters.fineweb import FineWebQualityFilter
from tokenmill.filters.gopher_quality import GopherQualityFilter
from tokenmill.filters.gopher_repetition import GopherRepetitionFilter
from tokenmill.filters.protocol import Filter
from tokenmill.filters.settings import filter_settings
from tokenmill.filters.url import URLFilter

_FILTERS: dict[str, type[Filter]] = {}
_SETTINGS: dict[str, type] = {}


def register(cls: type[Filter]) -> type[Filter]:
    """Add a built-in filter after those registered. Its settings dataclass,
    ``<Class>Settings``, is made here and bound in this module under that name: worker
    processes unpickle settings by it."""
    if not (isinstance(cls, type) and issubclass(cls, Filter)):
        raise TypeError(f"a built-in filter derives from Filter: {cls!r}")
    if cls.name in _FILTERS:
        raise ValueError(f"a built-in filter is named {cls.name!r} already")
    kind = filter_settings(cls, __name__)
    if kind.__name__ in globals():
        raise ValueError(f"{kind.__name__} is taken in {__name__}")
    _FILTERS[cls.name] = cls
    _SETTINGS[cls.name] = globals()[kind.__name__] = kind
    return cls


def unregister(cls: type[Filter]) -> None:
    if _FILTERS.get(cls.name) is not cls:
        raise ValueError(f"{cls.__name__} is not a registered built-in filter")
    del _FILTERS[cls.name]
    del globals()[_SETTINGS.pop(cls.name).__name__]


def builtin_filters() -> tuple[type[Filter], ...]:
    return tuple(_FILTERS.values())


def settings_types() -> dict[str, type]:
    """Each built-in filter's settings dataclass, by the filter's name, in order."""
    return dict(_SETTINGS)


# FineWeb's order (language identification happens elsewhere).
register(URLFilter)
register(GopherRepetitionFilter)
register(GopherQualityFilter)
register(C4QualityFilter)
register(FineWebQualityFilter)
