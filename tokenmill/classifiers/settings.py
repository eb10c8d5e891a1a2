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


# fastText's defaults hold 800 MB of bigram buckets and learn little from fewer examples than
# this; below it the settings are the small-data ones, as the demo's (a few hundred examples
# learn with them, and the model is a few MB)
SMALL_DATA_EXAMPLES = 5_000
SMALL_DATA = TrainingSettings(dim=16, epoch=25, lr=1.0, bucket=100_000)
TRAINING_FLAGS = ("epoch", "lr", "dim", "bucket", "seed")  # train-classifier's fastText flags
