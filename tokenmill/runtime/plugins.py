"""Plug-ins loaded by dotted path, from allowed modules only: filters (`tokenmill.filters.plugins`)
and scorers (`tokenmill.classifiers.scoring`).

A path names a module and an object in it. The module must be under one of the allowed prefixes
(``tokenmill.filters`` and those in ``TOKENMILL_FILTER_MODULES``, comma-separated), else it is not
even imported: a run config cannot make the pipeline import or call arbitrary code. The object
must be a class whose instances are callable or a function, defined in an allowed module too,
so that ``allowed.module.Popen`` after ``from subprocess import Popen`` is refused as well.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
from collections.abc import Sequence
from typing import Any

FILTER_MODULES_ENV = "TOKENMILL_FILTER_MODULES"
DEFAULT_FILTER_MODULES = ("tokenmill.filters.",)


class FilterNotAllowedError(ValueError):
    """A plug-in filter outside the allowed modules."""


def allowed_filter_modules() -> tuple[str, ...]:
    """The built-in filters' package and the prefixes listed in ``TOKENMILL_FILTER_MODULES``."""
    listed = os.environ.get(FILTER_MODULES_ENV, "").split(",")
    return DEFAULT_FILTER_MODULES + tuple(p.strip() for p in listed if p.strip())


def _is_allowed(module_name: str | None, prefixes: Sequence[str]) -> bool:
    """Whether the module is one of ``prefixes`` or inside one ("a.b" and "a.b." both allow "a.b"
    and "a.b.c", not "a.bc")."""
    if not module_name:
        return False
    packages = [p.strip().rstrip(".") for p in prefixes]
    return any(module_name == p or module_name.startswith(p + ".") for p in packages if p)


def _not_allowed(what: str, prefixes: Sequence[str]) -> FilterNotAllowedError:
    return FilterNotAllowedError(
        f"{what} is not in the allowed filter modules {list(prefixes)}; to allow it, add its"
        f" package to {FILTER_MODULES_ENV} (comma-separated module prefixes)"
    )


def import_allowed(path: str, allowed: Sequence[str]) -> Any:
    module_name, _, attribute = path.rpartition(".")
    if not module_name:
        raise ValueError(f"expected a dotted path 'package.module.object', got {path!r}")
    if not _is_allowed(module_name, allowed):
        top_level = module_name.partition(".")[0]
        if importlib.util.find_spec(top_level) is None:  # finds without importing
            raise ModuleNotFoundError(f"No module named {top_level!r}", name=top_level)
        raise _not_allowed(f"module {module_name!r} of {path!r}", allowed)
    return getattr(importlib.import_module(module_name), attribute)


def _defines_call(cls: type) -> bool:
    return any("__call__" in vars(base) for base in cls.__mro__ if base is not object)


def check_plugin_object(path: str, target: Any, allowed: Sequence[str]) -> None:
    """Refuses callables that are not filters (builtins such as ``os.system``, classes whose
    instances cannot be called) and objects defined outside the allowed modules."""
    if not (inspect.isclass(target) or inspect.isfunction(target)):
        raise TypeError(
            f"{path} is a {type(target).__name__}, neither a filter class nor a function"
        )
    if not _is_allowed(target.__module__, allowed):
        raise _not_allowed(f"{path!r} (defined in {target.__module__!r})", allowed)
    if inspect.isclass(target) and not _defines_call(target):
        raise TypeError(f"{path} is a class whose instances are not callable, not a filter")


def config_params(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters as a run config or a recipe gives them: strings are read as JSON when they
    parse (``"0.3"``, ``"true"``, ``"[1, 2]"``, ``'"quoted"'``) and kept as strings otherwise."""
    return {name: _literal(value) for name, value in params.items()}


def _literal(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def load_scorer_class(path: str, params: dict | None = None) -> Any:
    """A plug-in scorer (``tokenmill.classifiers.scoring``) from a dotted path in the allowed
    modules: a class whose instances have ``labels``, ``version`` and ``__call__(texts)``."""
    allowed = allowed_filter_modules()
    target = import_allowed(path, allowed)
    check_plugin_object(path, target, allowed)
    if not inspect.isclass(target):
        raise TypeError(f"{path} is a function; a scorer is a class with labels and version")
    scorer = target(**config_params(params or {}))
    for attribute in ("labels", "version"):
        if not getattr(scorer, attribute, None):
            raise TypeError(f"scorer {path} has no {attribute!r}")
    return scorer
