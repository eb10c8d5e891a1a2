"""Every use of Dagster's private API (``dagster._*``), in one place.

tokenmill pins Dagster (pyproject.toml); these names are not covered by Dagster's deprecation
policy and may move or change in any release. `tests/test_dagster_internals.py` checks each of
them against the installed Dagster and fails, naming what changed, on an upgrade that breaks
one. Nothing else in the project imports ``dagster._*``.

- Data versions: an ``AssetObservation`` takes tags, not a data version; only the private module
  names the tag and reads it back from an event (`tokenmill.data_assets.partitions`); the tag
  of the code version a materialization was made by (`tokenmill.data_assets.conditions`).
- Staleness: the resolver the UI uses to say which partitions are stale, and what it reads the
  instance through (`stale_status_resolver`, `tokenmill.cli.runner`).
- Config: resolving a resource's config the way a run does (`tokenmill.resources.locked`).
- Run progress: ``execute_in_process`` takes no callback; a listener added on the instance gets
  each event of the run as it is stored, and the run's plan snapshot says which steps it will
  run (undocumented instance methods), a mapped step planned once as ``<op>[?]``
  (`tokenmill.cli.runner`).
- Automation ticks at corpus scale (`read_keys_once_per_tick`): Dagster compresses each subset
  of a dynamic partitions definition that it writes into an automation sensor's cursor into key
  ranges, and to do so reads every key of the definition from the instance: once per subset,
  dozens of times per asset and tick, empty subsets included. With 90,000 units an idle tick
  spent nearly all its time re-reading the unit list (`benchmarks/bench_scale.py`). Here an empty
  subset is written as it is (it needs no compression), and a tick reads each definition's keys
  once: the subsets it writes were computed from keys read earlier in the same tick, and
  partitions are never deleted, so that read holds every key they contain. The automation
  sensors run in the code server (``use_user_code_server``), where this module is loaded with
  the definitions.
- Claims of pool slots (`install_claim_checks`): Dagster's executors claim a step's slot through
  ``InstanceConcurrencyContext``, made once per run by the process that orchestrates it. That is
  where a run records its process, where a step first waits for another run on its asset
  partition, and where a refused claim frees slots held by dead runs (`tokenmill.runs`). Its
  wait between claims is fixed too: the time to the next claim is ``min(0, ...)`` there, never
  positive, so a blocked run spun at full CPU instead of sleeping.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict

from dagster import DagsterInvalidConfigError
from dagster._config.post_process import post_process_config
from dagster._core.definitions.data_version import (
    CODE_VERSION_TAG,
    DATA_VERSION_TAG,
    CachingStaleStatusResolver,
    StaleCauseCategory,
    StaleStatus,
    extract_data_version_from_entry,
)

# the function Dagster's cursor serialization calls for every subset it writes, the partition
# loading context it reads the keys through, and Dagster's caching store
from dagster._core.definitions.declarative_automation import serialized_objects
from dagster._core.definitions.partitions.context import _current_ctx, partition_loading_context
from dagster._core.definitions.partitions.subset.default import DefaultPartitionsSubset
from dagster._core.errors import DagsterInvalidPropertyError
from dagster._core.execution.plan import instance_concurrency_context
from dagster._core.execution.plan.handle import ResolvedFromDynamicStepHandle, StepHandle
from dagster._core.instance import DagsterInstance
from dagster._core.instance.types import CachingDynamicPartitionsLoader
from dagster._core.loader import LoadingContext
from dagster._utils.error import SerializableErrorInfo

__all__ = [
    "CODE_VERSION_TAG",
    "DATA_VERSION_TAG",
    "CachingStaleStatusResolver",
    "DagsterInvalidPropertyError",
    "LoadingContext",
    "SerializableErrorInfo",
    "StaleCauseCategory",
    "StaleStatus",
    "extract_data_version_from_entry",
    "follow_run",
    "install_claim_checks",
    "planned_form",
    "planned_steps",
    "read_keys_once_per_tick",
    "resource_config",
    "stale_status_resolver",
]


class _InstanceLoading(LoadingContext):
    """What Dagster's staleness resolver reads the instance through."""

    def __init__(self, instance: DagsterInstance):
        self._instance, self._loaders = instance, {}

    @property
    def instance(self) -> DagsterInstance:
        return self._instance

    @property
    def loaders(self) -> dict:
        return self._loaders


def stale_status_resolver(instance: DagsterInstance, asset_graph) -> CachingStaleStatusResolver:
    """The resolver the UI uses: a partition is fresh, missing, or stale and why."""
    return CachingStaleStatusResolver(instance, asset_graph, _InstanceLoading(instance))


def resource_config(resource) -> dict | None:
    """A configurable resource's config as a run would resolve it (its ``EnvVar`` fields read
    from this process's environment); None when Dagster no longer has the private methods."""
    if not hasattr(resource, "_convert_to_config_dictionary"):
        return None
    config = post_process_config(
        resource._config_schema.config_type, resource._convert_to_config_dictionary()
    )
    if not config.success:
        raise DagsterInvalidConfigError("Errors while initializing resource", config.errors, config)
    return config.value


def follow_run(instance: DagsterInstance, run_id: str, listener) -> None:
    """Call ``listener`` with each event (an ``EventLogEntry``) of run ``run_id`` as the instance
    stores it, in the thread storing it: for a run executed in process, the caller's."""
    instance.add_event_listener(run_id, listener)


def planned_steps(instance: DagsterInstance, run_id: str) -> list[str]:
    """The keys of the steps run ``run_id`` plans to execute; a mapped step, whose copies are
    known once its input is, is one key, ``<op>[?]``."""
    run = instance.get_run_by_id(run_id)
    plan = instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
    return [step.key for step in plan.steps]


def planned_form(step_key: str) -> str:
    """The key a step has in its run's plan: ``<op>[?]`` for a mapped step's copy ``<op>[2]``."""
    handle = StepHandle.parse_from_key(step_key)
    if isinstance(handle, ResolvedFromDynamicStepHandle):
        return handle.unresolved_form.to_key()
    return step_key


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


CLAIMS_PATCHED = "tokenmill_claim_checks"


def install_claim_checks(on_start, before_claim, after_refused, on_wait, retry_s: float) -> bool:
    """Have every run's concurrency context call ``on_start(instance, run)`` as the run's
    execution starts, ``before_claim(instance, run, step_key)`` before a step claims its slot and
    ``after_refused(instance, run, step_key, pool)`` when the pool refused it. Each of the two
    returns None to go on (after a refusal: to claim again at once) or a wait, passed to
    ``on_wait(instance, run, step_key, wait)``; the step then tries again within ``retry_s``.
    Installed once; False (with a warning) when Dagster's class no longer has what it wraps."""
    context = getattr(instance_concurrency_context, "InstanceConcurrencyContext", None)
    wrapped = ("__init__", "__enter__", "claim", "interval_to_next_pending_claim_check")
    if context is None or not all(hasattr(context, name) for name in wrapped):
        logging.getLogger("tokenmill").warning(
            "dagster changed how steps claim pool slots: dead runs' slots are not freed by runs"
        )
        return False
    if getattr(context, CLAIMS_PATCHED, False):
        return True
    init, enter, claim = context.__init__, context.__enter__, context.claim

    def __init__(self, instance, dagster_run):
        init(self, instance, dagster_run)
        self._tokenmill_run = dagster_run

    def __enter__(self):
        entered = enter(self)
        on_start(self._instance, self._tokenmill_run)
        return entered

    def checked_claim(self, concurrency_key, step_key, step_priority=0):
        if step_key in self._pending_claims and time.time() < self._pending_timeouts[step_key]:
            return False
        if not self._instance.event_log_storage.supports_global_concurrency_limits:
            return claim(self, concurrency_key, step_key, step_priority)
        run = self._tokenmill_run
        retry_at = time.time() + retry_s
        wait = before_claim(self._instance, run, step_key)
        if wait is None:
            if claim(self, concurrency_key, step_key, step_priority):
                return True
            # refused: Dagster set its own next try, which may be later than ours
            retry_at = min(retry_at, self._pending_timeouts[step_key])
            wait = after_refused(self._instance, run, step_key, concurrency_key)
        if wait is None:
            retry_at = 0.0  # slots held in vain were freed: claim again now
        else:
            on_wait(self._instance, run, step_key, wait)
        self._pending_timeouts[step_key] = retry_at
        self._pending_claims.add(step_key)
        return False

    def interval_to_next_pending_claim_check(self) -> float:
        if not self._pending_claims:
            return 0.0
        now = time.time()
        return max(0.0, min(self._pending_timeouts[step] - now for step in self._pending_claims))

    context.__init__ = __init__
    context.__enter__ = __enter__
    context.claim = checked_claim
    context.interval_to_next_pending_claim_check = interval_to_next_pending_claim_check
    setattr(context, CLAIMS_PATCHED, True)
    return True
