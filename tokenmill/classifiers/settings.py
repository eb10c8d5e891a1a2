"""A classifier's training settings: plain data, cheap to import (the command line's options)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrainingSettings:
    """fastText's supervised settings (its defaults), with bigrams (``word_ngrams`` 2) as
    DCLM's classifier. The model holds ``bucket`` x ``dim`` floats for the bigrams (800 MB at
    the defaults); a few hundred examples need more epochs and a higher rate to learn."""

    word_ngrams: int = 2
    dim: int = 100
    epoch: int = 5
    lr: float = 0.1
    min_count: int = 1
    bucket: int = 2_000_000
    seed: int = 0
