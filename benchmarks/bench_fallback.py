"""What the hybrid extractor's trafilatura fallback is worth at each gate: the share of the
page's words under which a lost main content goes to trafilatura (``TRAFILATURA_SHARE``; 0:
never, ``FALLBACK_SHARE``: whenever the text looks lost).

    uv run python benchmarks/bench_fallback.py [--trafilatura-tests DIR]

Corpora: ../shared's wcxb-dev-sample and scrapinghub-articles (mean word F1 against their
ground truth) and, with ``--trafilatura-tests``, the ``tests`` folder of a checkout of
adbar/trafilatura (its evaluation pages, ``eval/`` and ``cache/``, and ``evaldata.json``:
snippets a main content must hold and must not hold; F1 over the snippets, as its
``tests/evaluate.py`` counts them). Per corpus and gate: the score, the pages sent to
trafilatura and the extraction's CPU seconds over all pages. Prints a table and appends one
line to benchmarks/results.jsonl (BENCH_RESULTS=/tmp/trial.jsonl for a trial).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_clean import load_pages, word_prf
from benchmarks.measure import print_table
from benchmarks.results import record
from testkit.shared_data import shared_path
from tokenmill.crawl import extract
from tokenmill.crawl.extract import FALLBACK_SHARE, TRAFILATURA_SHARE, decode_html

GATES = (0.0, 0.02, TRAFILATURA_SHARE, 0.1, 0.2, FALLBACK_SHARE)


def word_scored(corpus: str) -> list[tuple[str, Callable[[str], float]]]:
    """(html, score of a text) of a ground-truth corpus of ../shared: word F1."""
    return [
        (html, lambda text, gold=gold: word_prf(text, gold)[2])
        for html, gold, _ in load_pages(corpus)
    ]


def mean_of(scored: list[tuple[str, Callable[[str], float]]]) -> Callable[[list[str]], float]:
    """The mean score of the texts of ``scored``'s pages, in order."""

    def mean(texts: list[str]) -> float:
        return sum(score(text) for text, (_, score) in zip(texts, scored, strict=True)) / len(texts)

    return mean


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def snippet_scored(tests: Path) -> list[tuple[str, tuple[list[str], list[str]]]]:
    """(html, (snippets it must hold, snippets it must not)) of trafilatura's evaluation set."""
    pages = []
    for item in json.loads((tests / "evaldata.json").read_text("utf-8")).values():
        found = [tests / folder / item["file"] for folder in ("cache", "eval")]
        path = next((p for p in found if p.is_file()), None)
        if path is not None:
            html = decode_html(path.read_bytes(), None)[0]
            pages.append(
                (html, ([_norm(w) for w in item["with"]], [_norm(w) for w in item["without"]]))
            )
    return pages


def snippet_f1(texts: list[str], snippets: list[tuple[list[str], list[str]]]) -> float:
    tp = fp = fn = 0
    for text, (held, left_out) in zip(texts, snippets, strict=True):
        text = _norm(text)
        found = sum(w in text for w in held)
        tp, fn, fp = tp + found, fn + len(held) - found, fp + sum(w in text for w in left_out)
    precision, recall = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    return 2 * precision * recall / max(precision + recall, 1e-9)


def routed(pages: list[str], gate: float) -> tuple[list[str], int, float]:
    """The hybrid extractor's texts of ``pages`` with trafilatura behind ``gate``, how many
    pages went to trafilatura, and the CPU seconds."""
    extract.TRAFILATURA_SHARE = gate
    try:
        started, texts, sent = time.process_time(), [], 0
        for html in pages:
            text, route = extract.main_content_route(html, fallback=True)
            texts.append(text)
            sent += route == "trafilatura"
        return texts, sent, time.process_time() - started
    finally:
        extract.TRAFILATURA_SHARE = TRAFILATURA_SHARE


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trafilatura-tests", type=Path, help="adbar/trafilatura's tests folder")
    args = parser.parse_args(argv)
    corpora = {}
    if shared_path("corpora", "extraction") is not None:
        for corpus in ("wcxb-dev-sample", "scrapinghub-articles"):
            scored = word_scored(corpus)
            corpora[corpus] = ([html for html, _ in scored], "mean word F1", mean_of(scored))
    if args.trafilatura_tests is not None:
        pages = snippet_scored(args.trafilatura_tests)
        snippets = [s for _, s in pages]
        corpora["trafilatura-eval"] = (
            [html for html, _ in pages],
            "snippet F1",
            lambda texts: snippet_f1(texts, snippets),
        )
    if not corpora:
        print("(nothing to measure: ../shared is absent and no --trafilatura-tests)")
        return
    rows, figures = [], {}
    for name, (pages, measure, score) in corpora.items():
        routed(pages, FALLBACK_SHARE)  # warm-up: the first pass over pages is the slowest
        for gate in GATES:
            texts, sent, seconds = routed(pages, gate)
            value = score(texts)
            rows.append([name, len(pages), measure, gate, round(value, 4), sent, round(seconds, 2)])
            figures.setdefault(name, {})[str(gate)] = {
                "score": round(value, 4),
                "to_trafilatura": sent,
                "cpu_s": round(seconds, 3),
            }
    print_table(
        f"The trafilatura fallback by gate (tokenmill's: {TRAFILATURA_SHARE}): a lost main "
        "content under this share of the page's words goes to trafilatura",
        ["corpus", "pages", "score", "gate", "value", "pages to trafilatura", "CPU s"],
        rows,
    )
    record(
        "bench_fallback",
        figures,
        {"corpora": {name: len(pages) for name, (pages, _, _) in corpora.items()},
         "data": "../shared extraction corpora; trafilatura's tests/evaldata.json pages"},
    )  # fmt: skip


if __name__ == "__main__":
    main()
