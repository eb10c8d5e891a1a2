"""The real data beside the checkout, in ../shared (absent from a user's clone)."""

from __future__ import annotations

from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"


def shared_path(*parts: str) -> Path | None:
    """A file or folder of ../shared, or None when it is absent."""
    path = SHARED.joinpath(*parts)
    return path if path.exists() else None
