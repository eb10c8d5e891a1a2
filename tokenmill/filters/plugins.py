"""Plug-in filters loaded by dotted path: a filter class, a batch function or a per-document
function, from the allowed modules only (see `tokenmill.runtime.plugins`), each as a `Filter`:
a function wrapped here, an instance of a class that does not derive from `Filter` wrapped by
`as_filter` (what it declares of the interface kept, defaults elsewhere)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import polars as pl

from tokenmill.filters.protocol import Filter, FilterResult, as_filter
from tokenmill.runtime.plugins import allowed_filter_modules, check_plugin_object, import_allowed


class BatchFunctionFilter(Filter):
    """Wraps ``f(docs: pl.DataFrame) -> pl.Series`` (null = keep, string = drop reason)."""

    def __init__(self, function: Callable[..., pl.Series], name: str, params: dict | None = None):
        self.function = function
        self.name = name
        self.params = params or {}

    def __call__(self, docs: pl.DataFrame) -> pl.Series | FilterResult:
        return self.function(docs, **self.params)


class DocumentFunctionFilter(Filter):
    """Wraps ``f(text: str) -> bool | str | None`` applied row by row (slow path).

    True or None keeps the document; False drops it with the filter name as reason, a string
    drops it with that string as reason.
    """

    def __init__(
        self, function: Callable[..., bool | str | None], name: str, params: dict | None = None
    ):
        self.function = function
        self.name = name
        self.params = params or {}

    def _reason(self, text: str) -> str | None:
        verdict = self.function(text, **self.params)
        if verdict is None or verdict is True:
            return None
        return self.name if verdict is False else str(verdict)

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        reasons = [self._reason(text) for text in docs["text"].fill_null("").to_list()]
        return pl.Series("reason", reasons, dtype=pl.Utf8)


def _takes_dataframe(function: Callable) -> bool:
    first = next(iter(inspect.signature(function).parameters.values()), None)
    if first is None:
        return False
    annotation = first.annotation
    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1] == "DataFrame"
    return annotation is pl.DataFrame or (
        annotation is inspect.Parameter.empty and first.name == "docs"
    )


def load_filter(
    path: str, params: dict | None = None, allowed_prefixes: Sequence[str] | None = None
) -> Filter:
    """Filter from a dotted path: a class following the filter interface (instantiated with
    ``params``), a batch function whose first parameter is annotated ``pl.DataFrame`` (or named
    ``docs``), or a per-document function of the text. Extra ``params`` are passed as keyword
    arguments to functions. The name is the object's ``name`` or the last path component.

    The path and the object must be in ``allowed_prefixes`` (default: ``allowed_filter_modules()``),
    else ``FilterNotAllowedError``; see the module docstring."""
    allowed = allowed_filter_modules() if allowed_prefixes is None else tuple(allowed_prefixes)
    target = import_allowed(path, allowed)
    check_plugin_object(path, target, allowed)
    default_name = path.rpartition(".")[2]
    if inspect.isclass(target):
        instance = target(**(params or {}))
        if not getattr(instance, "name", None):
            instance.name = default_name
        return as_filter(instance)
    name = getattr(target, "name", default_name)
    wrapper = BatchFunctionFilter if _takes_dataframe(target) else DocumentFunctionFilter
    return wrapper(target, name, params)
