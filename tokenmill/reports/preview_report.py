"""A preview (`tokenmill.reports.preview`) as text and as an HTML page: what "now" is, the
totals and the per-language counts kept now and proposed, the drops per filter and rule, the
documents whose fate changes, and (HTML) each rule's distribution with both thresholds."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from tokenmill.reports.plots import MARK_COLORS
from tokenmill.reports.plots import pictures as rule_pictures
from tokenmill.reports.preview import (
    DEDUPLICATED,
    ESTIMATED,
    KEPT,
    SHARDS,
    SIDES,
    TOKENIZED,
    Preview,
    Tally,
)

UNKNOWN = "?"
ESTIMATE = "~"  # marks a token count estimated (partly) from words


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list] = field(default_factory=list)
    details: dict[int, list[str]] = field(default_factory=dict)  # lines under a row
    notes: list[str] = field(default_factory=list)


def tables(result: Preview) -> list[Table]:
    found = [_totals(result), _languages(result), _language_drops(result), _rules(result)]
    return [table for table in found if table is not None] + [_transitions(result)]


def _tokens(tally: Tally, result: Preview) -> str:
    count = tally.estimated_tokens(result.tokens_per_word)
    if count is None:
        return UNKNOWN
    return f"{ESTIMATE if tally.untokenized_words else ''}{count:,}"


def _change(now: int | None, then: int | None, estimated: bool = False) -> str:
    if now is None or then is None:
        return UNKNOWN
    return f"{ESTIMATE if estimated else ''}{then - now:+,}"


def _counts(label: str, now: int, then: int) -> list[str]:
    return [label, f"{now:,}", f"{then:,}", _change(now, then)]


def _totals(result: Preview) -> Table:
    now, then = (result.kept[side] for side in SIDES)
    per_word = result.tokens_per_word
    table = Table("kept", ["", "now", "proposed", "change"])
    table.rows = [
        _counts("documents", now.documents, then.documents),
        _counts("words", now.words, then.words),
        [
            "tokens",
            _tokens(now, result),
            _tokens(then, result),
            _change(
                now.estimated_tokens(per_word),
                then.estimated_tokens(per_word),
                bool(now.untokenized_words or then.untokenized_words),
            ),
        ],
    ]
    table.notes = [_token_sources(result)]
    return table


def _token_sources(result: Preview) -> str:
    sources = result.token_sources
    said = []
    if sources[SHARDS]:
        said.append(f"from the recipe's tokenized shards for {sources[SHARDS]:,} documents")
    if sources[DEDUPLICATED]:
        said.append(f"none for {sources[DEDUPLICATED]:,} kept now but removed by deduplication")
    if sources[TOKENIZED]:
        said.append(f"the recipe's tokenizer's for {sources[TOKENIZED]:,} whose fate changes")
    if sources[ESTIMATED]:
        ratio = result.tokens_per_word
        said.append(
            f"estimated ({ESTIMATE}) for {sources[ESTIMATED]:,} from their words at "
            f"{ratio:.3f} tokens per word"
            + (f" (recipe {result.ratio_from}'s tokenized shards)" if result.ratio_from else "")
            if ratio
            else f"not known ({UNKNOWN}) for {sources[ESTIMATED]:,}: no recipe of the lake has "
            "tokenized shards to estimate them from"
        )
    return "tokens: " + "; ".join(said) if said else "tokens: no document kept"


def _languages(result: Preview) -> Table:
    table = Table(
        "kept per language",
        ["language", "now", "proposed", "change", "tokens now", "tokens proposed"],
    )
    now, then = (result.languages[side] for side in SIDES)
    by_size = sorted(now.keys() | then.keys(), key=lambda lang: _most(lang, now, then))
    for language in by_size:
        counts = [side.get(language, Tally()) for side in (now, then)]
        table.rows.append(
            [
                *_counts(language, counts[0].documents, counts[1].documents),
                *(_tokens(tally, result) for tally in counts),
            ]
        )
    return table


def _language_drops(result: Preview) -> Table | None:
    """What each filter drops of each language kept on either side, when several are: each
    judged by its own thresholds."""
    now, then = (result.languages[side] for side in SIDES)
    kept = sorted(now.keys() | then.keys(), key=lambda lang: _most(lang, now, then))
    if len(kept) < 2:
        return None
    table = Table("dropped per language and filter", ["language / filter", "now", "proposed",
                                                      "change"])  # fmt: skip
    drops = [result.language_drops[side] for side in SIDES]
    for language in kept:
        names = sorted({name for side in drops for lang, name in side if lang == language})
        totals = [sum(n for (lang, _), n in side.items() if lang == language) for side in drops]
        table.rows.append(_counts(language, *totals))
        for name in names:
            table.rows.append(_counts(f"  {name}", *(side[(language, name)] for side in drops)))
    return table


def _most(language: str, *sides: dict) -> tuple:
    return (-max(side[language].documents if language in side else 0 for side in sides), language)


def _rules(result: Preview) -> Table:
    table = Table("dropped per filter and rule", ["filter / rule", "now", "proposed", "change"])
    now, then = (result.dropped_by[side] for side in SIDES)
    rules = result.rules["current"].keys() | result.rules["proposed"].keys()
    for name in sorted(now.keys() | then.keys()):
        table.rows.append(_counts(name, now[name], then[name]))
        for key in sorted(r for r in rules if r[0] == name):
            table.rows.append(_counts(f"  {key[1]}", *(result.rules[side][key] for side in SIDES)))
    return table


def _fate(fate: tuple[str, str]) -> str:
    return KEPT[0] if fate == KEPT else f"{fate[0]} / {fate[1]}"


def _transitions(result: Preview) -> Table:
    table = Table(
        "documents whose fate changes",
        ["now", "proposed", "documents", "words", "tokens"],
    )
    ordered = sorted(result.transitions.items(), key=lambda t: (-t[1].documents, t[0]))
    for (now, then), tally in ordered:
        kept = KEPT in (now, then)
        table.details[len(table.rows)] = [
            f"{sample['url']}  ({sample['reason_current'] or KEPT[0]} -> "
            f"{sample['reason_proposed'] or KEPT[0]})"
            for sample in tally.samples
        ]
        table.rows.append(
            [
                _fate(now),
                _fate(then),
                f"{tally.documents:,}",
                f"{tally.words:,}",
                _tokens(tally, result) if kept else "-",
            ]
        )
    if not ordered:
        table.notes = ["none"]
    return table


def _heading(result: Preview) -> list[str]:
    proposed = ["proposed: the same settings"]
    if result.changes:
        proposed = ["proposed, differing in:", *(f"  {change}" for change in result.changes)]
    return [
        *result.now,
        *proposed,
        f"{result.documents:,} extracted documents; columns read: "
        + ("all" if "text" in result.columns_read else "signals only (no text)"),
    ]


def text_report(result: Preview) -> str:
    lines = _heading(result)
    for table in tables(result):
        lines += ["", f"{table.title}:"]
        lines += _aligned(table)
        lines += [f"  {note}" for note in table.notes]
    return "\n".join(lines)


def _aligned(table: Table) -> list[str]:
    if not table.rows:
        return []
    columns = list(zip(table.header, *table.rows, strict=True))
    widths = [max(len(str(cell)) for cell in column) for column in columns]
    # a column of figures is right-aligned, its heading too
    right = [i > 0 and all(map(_numeric, column[1:])) for i, column in enumerate(columns)]
    lines = []
    for index, row in enumerate([table.header, *table.rows]):
        text = [
            str(cell).rjust(width) if aligned else str(cell).ljust(width)
            for cell, width, aligned in zip(row, widths, right, strict=True)
        ]
        lines.append("  " + "  ".join(text).rstrip())
        lines += [f"      {line}" for line in table.details.get(index - 1, [])]
    return lines


def _numeric(cell) -> bool:
    text = str(cell).lstrip(f"+-{ESTIMATE}").replace(",", "")
    return text.isdigit() or text in (UNKNOWN, "")


def html_report(result: Preview) -> str:
    """The report's tables and, per rule, its values' histogram with both thresholds marked."""
    pictures = [
        f"<h4>{html.escape(key)}</h4><p>{html.escape(caption)}</p>"
        f"<img alt='{html.escape(key)}' src='{uri}' style='border:1px solid #ccc'>"
        for key, caption, uri in rule_pictures(result.histograms, result.thresholds)
    ]
    return (
        "<!doctype html><meta charset=utf-8><title>tokenmill preview</title>"
        "<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}.d{font-size:small;color:#555;"
        "text-align:left}</style><body>"
        f"<pre>{html.escape(chr(10).join(_heading(result)))}</pre>"
        + "".join(_html_table(table) for table in tables(result))
        + "<h3>distributions</h3>"
        "<p>Each rule's value over every document read (bins 0.01 wide in "
        f"[0, 1], 10 per decade above 1): <span style='color:{MARK_COLORS['current']}'>"
        f"current</span> and <span style='color:{MARK_COLORS['proposed']}'>proposed</span> "
        "(dashed) thresholds.</p>" + "".join(pictures) + "</body>"
    )


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.header)
    rows = []
    for index, row in enumerate(table.rows):
        rows.append("<tr>" + "".join(map(_html_cell, row)) + "</tr>")
        if details := table.details.get(index):
            lines = "<br>".join(html.escape(line) for line in details)
            rows.append(f"<tr><td class=d colspan={len(row)}>{lines}</td></tr>")
    notes = "".join(f"<p>{html.escape(note)}</p>" for note in table.notes)
    body = f"<table><tr>{head}</tr>{''.join(rows)}</table>" if table.rows else ""
    return f"<h3>{html.escape(table.title)}</h3>{body}{notes}"


def _html_cell(cell) -> str:
    text = str(cell)
    indent = len(text) - len(text.lstrip(" "))  # a rule under its filter
    style = f" style='padding-left:{indent}em'" if indent else ""
    return f"<td{style}>{html.escape(text.strip())}</td>"
