"""Tables with an entry per Unicode code point (character classes, folded forms, combining
marks) that the word scanners, MinHash and NFC read, kept on disk once made.

They are made by asking polars or Python's ``unicodedata`` about every code point (regex
classes, normalization, combining classes): work every new worker process would repeat, for the
same answer, before its first document. A table is stored under a key of its name, the source of
the module that makes it, the polars version and Python's Unicode version, so a change to any of
them makes it again; one that cannot be read is made again, and a cache that cannot be written
is skipped.

Where: ``$TOKENMILL_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokenmill``, else ``~/.cache/tokenmill``.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

CACHE_DIR_VARIABLE = "TOKENMILL_CACHE_DIR"
CODE_POINTS = 0x110000


def cache_dir() -> Path:
    configured = os.environ.get(CACHE_DIR_VARIABLE)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base, "tokenmill")


def table_path(name: str, make: Callable[[], np.ndarray]) -> Path:
    """Where the table ``make`` makes is kept (see the module's docstring for its key)."""
    try:
        source = Path(sys.modules[make.__module__].__file__).read_bytes()
    except (KeyError, TypeError, OSError):  # no source file to read: the versions alone
        source = b""
    versions = f"\0{name}\0{pl.__version__}\0{unicodedata.unidata_version}"
    key = hashlib.sha256(source + versions.encode()).hexdigest()[:20]
    return cache_dir() / f"{name}-{key}.npy"


def cached_table(name: str, make: Callable[[], np.ndarray]) -> np.ndarray:
    """The table ``make`` makes (one entry per code point), read from the cache when it holds
    it, else made and stored there."""
    path = table_path(name, make)
    try:
        table = np.load(path, allow_pickle=False)
        if table.shape == (CODE_POINTS,):
            return table
    except (OSError, ValueError, EOFError):
        pass
    table = make()
    _store(path, table)
    return table


def _store(path: Path, table: np.ndarray) -> None:
    """Writes ``table`` to ``path`` whole or not at all (readers never see part of one)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return  # a read-only or missing cache: the table is made again next time
    try:
        with os.fdopen(handle, "wb") as out:
            np.save(out, table, allow_pickle=False)
        # readable by every user: the image stores them as root for the pods' own user
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)
