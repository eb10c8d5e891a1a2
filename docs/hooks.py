"""MkDocs hooks: where a page says `<!-- generated: NAME -->`, the reference generated from the
code (`docs/reference_pages.py`) takes its place when the site is built."""

from __future__ import annotations

import re

import reference_pages  # beside this file: MkDocs puts the hooks' folder on the import path

GENERATED = re.compile(r"^<!-- generated: (\w+) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return GENERATED.sub(lambda found: reference_pages.generated(found.group(1)), markdown)
