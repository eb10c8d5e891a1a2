"""The project's C libraries (compiled when it is installed: scripts/hatch_build.py), loaded with
ctypes: no Python API, any C compiler."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

I64 = ctypes.c_int64


def pointer(dtype, nullable: bool = False) -> type:
    """A ctypes argument taking a C-contiguous NumPy array of ``dtype`` (or None, a NULL
    pointer, when ``nullable``)."""
    array = np.ctypeslib.ndpointer(dtype=dtype, flags="C_CONTIGUOUS")
    if not nullable:
        return array

    def from_param(cls, value):
        return None if value is None else array.from_param(value)

    return type(f"{array.__name__}_or_null", (array,), {"from_param": classmethod(from_param)})


def load(path: Path, signatures: dict[str, tuple]) -> ctypes.CDLL:
    """The library at ``path``, its functions declared: name -> (return type, argument types)."""
    if not path.exists():
        raise ImportError(
            f"{path} is missing: install the project (uv sync; it needs a C compiler, cc)"
        )
    compiled = ctypes.CDLL(str(path))
    for name, (restype, argtypes) in signatures.items():
        function = getattr(compiled, name)
        function.restype, function.argtypes = restype, argtypes
    return compiled
