"""Per-language defaults of the filters (``defaults``): FineWeb-2's thresholds, stop words and
language-ID threshold for each language, shipped as data (``fineweb2.json``, see NOTICE.md).
Imports nothing from tokenmill."""
