"""Writes benchmarks/RESULTS.md from benchmarks/results.jsonl: for the latest line of each
benchmark, a table of its figures with the input, the machine and the command that reproduces
them (a test checks that RESULTS.md is what this writes).

    uv run python benchmarks/report.py
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.results import RESULTS, RESULTS_MD

PREAMBLE = (
    "The latest run of each benchmark, as it recorded itself in `benchmarks/results.jsonl`. "
    "Written by `uv run python benchmarks/report.py`; do not edit by hand."
)


def read(path: Path = RESULTS) -> list[dict]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def latest(lines: Iterable[dict]) -> dict[str, dict]:
    """The last line of each benchmark, by benchmark name."""
    found = {}
    for line in lines:
        found[line["benchmark"]] = line
    return dict(sorted(found.items()))


def render(lines: Iterable[dict]) -> str:
    parts = [PREAMBLE]
    for name, line in latest(lines).items():
        parts.append(section(name, line))
    return "\n\n".join(parts) + "\n"


def section(name: str, line: dict) -> str:
    scalars, tables = [], []
    for figure, value in flatten(line["figures"]):
        if is_table(value):
            tables.append((figure, value))
        else:
            scalars.append((figure, cell(value)))
    scalars += [
        ("input", describe(line["input"])),
        ("machine", machine(line)),
        ("how to reproduce", f"`{line['command']}`" if line.get("command") else "not recorded"),
    ]
    blocks = [f"## {name}", markdown_table(["figure", "value"], scalars)]
    for title, rows in tables:
        header = list(dict.fromkeys(column for row in rows for column in row))
        body = [[cell(row.get(column)) for column in header] for row in rows]
        blocks += [f"**{escape(title)}**", markdown_table(header, body)]
    return "\n\n".join(blocks)


def flatten(figures: dict, prefix: str = "") -> Iterable[tuple[str, Any]]:
    """(name, value) of every figure, nested names joined with " / "; a list of rows is one."""
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from flatten(value, f"{name} / ")
        else:
            yield name, value


def is_table(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def machine(line: dict) -> str:
    found = line.get("machine")
    if not found:
        return f"not recorded ({line['source']})" if line.get("source") else "not recorded"
    load = ", ".join(f"{value:.2f}" for value in found.get("load_average", []))
    return (
        f"{found['cores']} cores, {found['memory_bytes'] / 2**30:.1f} GiB, {found['cpu']}; "
        f"Python {found['python']} on {found['platform']}" + (f"; load {load}" if load else "")
    )


def describe(input: Any) -> str:
    if isinstance(input, dict):
        return "; ".join(
            f"{key}: ({describe(value)})" if isinstance(value, dict) else f"{key}: {cell(value)}"
            for key, value in input.items()
        )
    return cell(input)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):  # 3 decimals below 10, 1 above, no trailing zeros
        return f"{value:,.{3 if abs(value) < 10 else 1}f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(cell(v) for v in value)
    if isinstance(value, dict):
        return escape(json.dumps(value))
    return escape(str(value))


def escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(escape(h) for h in header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    RESULTS_MD.write_text(render(read()), encoding="utf-8")
    print(f"wrote {RESULTS_MD}")


if __name__ == "__main__":
    main()
