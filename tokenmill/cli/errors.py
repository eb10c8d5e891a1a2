"""What the command line says instead of a traceback, and with which exit status."""

from __future__ import annotations

USAGE_STATUS, FAILED_STATUS = 2, 1


class UsageError(ValueError):
    """An argument that names nothing valid (a recipe, crawl, stage, file): the message says
    what is wrong and the valid choices."""


def exit_status(error: BaseException) -> int | None:
    """2 for a usage error, 1 for work that failed for a reason the user can act on, None for
    a bug (its traceback is kept). Only the modules a command has imported are consulted, so
    that reporting an error imports nothing new."""
    import sys

    usage = [UsageError]
    failed: list[type] = [ValueError, FileNotFoundError]
    for module, names, kind in (
        ("tokenmill.recipes.catalog", ("UnknownRecipeError",), usage),
        ("tokenmill.classifiers.training", ("ClassifierInputError",), usage),
        ("tokenmill.reports.summary", ("NoSuchTokenError",), usage),
        ("tokenmill.storage.lake", ("LakeAccessError",), failed),
        ("tokenmill.cli.runner", ("RunsFailedError",), failed),
    ):
        if module in sys.modules:
            kind += [getattr(sys.modules[module], name) for name in names]
    if isinstance(error, tuple(usage)):
        return USAGE_STATUS
    if isinstance(error, tuple(failed)):
        return FAILED_STATUS
    return None
