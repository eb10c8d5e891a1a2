"""Keeping an automation tick cheap at corpus scale.

Dagster (1.13) compresses each subset of a dynamic partitions definition that it writes into an
automation sensor's cursor into key ranges, and to do so reads every key of the definition from
the instance: once per subset, dozens of times per asset and tick (one subset per node of its
condition), empty subsets included. With 90,000 units an idle tick spent nearly all its time
re-reading the unit list (`benchmarks/bench_scale.py`, see the README). Here an empty subset is
written as it is (it needs no compression), and a tick reads each definition's keys once: the
subsets it writes were computed from keys read earlier in the same tick, and partitions are
never deleted, so that read holds every key they contain. The automation sensors run in the
code server (`use_user_code_server`), where this module is loaded with the definitions.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import OrderedDict

# private: the function Dagster's cursor serialization calls for every subset it writes, the
# partition loading context it reads the keys through, and Dagster's caching store
from dagster._core.definitions.declarative_automation import serialized_objects
from dagster._core.definitions.partitions.context import _current_ctx, partition_loading_context
from dagster._core.definitions.partitions.subset.default import DefaultPartitionsSubset
from dagster._core.instance import DagsterInstance
from dagster._core.instance.types import CachingDynamicPartitionsLoader

PATCHED = "tokenmill_reads_keys_once_per_tick"
TICKS_KEPT = 8  # the automation sensors tick in parallel threads, one key list each


_ticks: OrderedDict = OrderedDict()
_ticks_lock = threading.Lock()


def _tick_store(context):
    """The store of the tick whose cursor is being written: its context's effective time (one
    per tick) and instance."""
    key = (id(context.dynamic_partitions_store), context.temporal_context.effective_dt)
    with _ticks_lock:
        if key not in _ticks:
            _ticks[key] = CachingDynamicPartitionsLoader(context.dynamic_partitions_store)
            while len(_ticks) > TICKS_KEPT:
                _ticks.popitem(last=False)
        return _ticks[key]


def read_keys_once_per_tick() -> bool:
    """Install the shortcut once; False (with a warning) when Dagster no longer has the
    function, so a Dagster upgrade without it runs as Dagster does."""
    compress = getattr(serialized_objects, "_get_maybe_compressed_dynamic_partitions_subset", None)
    if compress is None:
        logging.getLogger("tokenmill").warning(
            "dagster changed its cursor serialization: automation ticks read partitions as it does"
        )
        return False
    if getattr(compress, PATCHED, False):
        return True

    @functools.wraps(compress)
    def compressed(subset):
        value = subset.get_internal_value()
        if isinstance(value, DefaultPartitionsSubset) and not value.subset:
            return subset.convert_to_serializable_subset()
        context = _current_ctx.get()
        if context is None or not isinstance(context.dynamic_partitions_store, DagsterInstance):
            return compress(subset)
        with partition_loading_context(dynamic_partitions_store=_tick_store(context)):
            return compress(subset)

    setattr(compressed, PATCHED, True)
    serialized_objects._get_maybe_compressed_dynamic_partitions_subset = compressed
    return True
