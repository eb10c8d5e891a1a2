"""Where the extracted stage's CPU time goes: timers wrapped around its components for one run.

``attributed(work)`` patches the stage's modules for the length of ``work`` only (the stage's
normal runs pay nothing) and returns the CPU seconds of each component, exclusive of the
components it calls (the trafilatura fallback is not counted in extraction), and ``other``:
what no timer covered (provenance, batching, the marker).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import tokenmill.crawl.extract as extract
import tokenmill.crawl.http_messages as http
import tokenmill.filters.signals as signals_module
import tokenmill.stages.extracted as extracted
import tokenmill.storage.outputs as outputs

# Components in the order a record meets them.
COMPONENTS = (
    "read",
    "HTTP and charset",
    "extraction",
    "fallback",
    "NFC",
    "language ID",
    "rows to polars",
    "PII",
    "filter words",
    "write",
    "other",
)


class Attribution:
    """Exclusive CPU seconds per component: a component's time less that of those it calls."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._inner: list[float] = []  # per open timer: time spent in timers it called

    @contextmanager
    def timer(self, component: str) -> Iterator[None]:
        self._inner.append(0.0)
        started = time.process_time()
        try:
            yield
        finally:
            spent = time.process_time() - started
            inner = self._inner.pop()
            self.seconds[component] += spent - inner
            self.calls[component] += 1
            if self._inner:
                self._inner[-1] += spent

    def wrap(self, component: str, function: Callable) -> Callable:
        def timed(*args, **kwargs):
            with self.timer(component):
                return function(*args, **kwargs)

        return timed

    def wrap_iterator(self, component: str, function: Callable[..., Iterator]) -> Callable:
        def timed(*args, **kwargs) -> Iterator:
            items = function(*args, **kwargs)
            while True:
                with self.timer(component):
                    item = next(items, _END)
                if item is _END:
                    return
                yield item

        return timed


_END = object()


class _TimedFilter:
    """A filter or formatter of the signal profile, timed under its own name."""

    def __init__(self, inner, attribution: Attribution, component: str):
        self._inner = inner
        self._call = attribution.wrap(component, inner.__call__)
        if hasattr(inner, "measure"):  # a filter: the profile measures, it does not judge
            self.measure = attribution.wrap(component, inner.measure)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __call__(self, docs):
        return self._call(docs)


def _patch(stack: ExitStack, owner, name: str, value) -> None:
    original = getattr(owner, name)
    setattr(owner, name, value)
    stack.callback(setattr, owner, name, original)


def attributed(work: Callable[[], Any]) -> tuple[Any, dict[str, float], dict[str, int], float]:
    """``work``'s result, the CPU seconds and the number of calls of each of ``COMPONENTS``
    (filters as ``filter: <name>``) and its total CPU seconds."""
    costs = Attribution()
    wrap = costs.wrap
    with ExitStack() as stack:
        _patch(
            stack, extracted, "iter_records", costs.wrap_iterator("read", extracted.iter_records)
        )
        for name in ("parse_http_head", "looks_binary", "decode_html"):
            _patch(stack, extract, name, wrap("HTTP and charset", getattr(extract, name)))
        _patch(
            stack, http.HttpResponse, "decoded", wrap("HTTP and charset", http.HttpResponse.decoded)
        )
        _patch(stack, extract, "html_to_text", wrap("extraction", extract.html_to_text))
        _patch(stack, extract, "_trafilatura", wrap("fallback", extract._trafilatura))
        _patch(stack, extracted, "nfc", wrap("NFC", extracted.nfc))
        identifier = extracted.identifier
        _patch(stack, extracted, "identifier", lambda b: wrap("language ID", identifier(b)))
        _patch(stack, extracted, "_frame", wrap("rows to polars", extracted._frame))
        words = wrap("filter words", signals_module.with_words_for)
        _patch(stack, signals_module, "with_words_for", words)
        for name in ("write", "write_table", "close"):
            method = getattr(outputs.ParquetSink, name)
            _patch(stack, outputs.ParquetSink, name, wrap("write", method))
        profile = extracted.EXTRACTED_SIGNALS
        timed = signals_module.SignalProfile(
            [_TimedFilter(f, costs, f"signals: {f.name}") for f in profile.filters],
            [_TimedFilter(f, costs, "PII") for f in profile.formatters],
        )
        _patch(stack, extracted, "EXTRACTED_SIGNALS", timed)
        started = time.process_time()
        result = work()
        total = time.process_time() - started
    seconds = dict(costs.seconds)
    seconds["other"] = total - sum(seconds.values())
    return result, seconds, dict(costs.calls), total
