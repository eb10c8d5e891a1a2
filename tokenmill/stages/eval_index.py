"""eval_index: the evaluation sets the shared settings declare, indexed for decontamination.

For each set it reads the file's SHA-256 and, unless an index of that version is committed
(`eval_sets/<sha256>/`), reads the items in batches and commits their normalized words
(`tokenmill.decontamination.index`). Its own output, `sets.json`, names each set's version: the
data version recipes that decontaminate against a set follow. A file replaced under the same name
is seen when this stage runs again (pin `sha256` to make a run refuse any other file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tokenmill.decontamination.index import SETS_FILE, build_index
from tokenmill.decontamination.sets import EvalSet, sha256_of
from tokenmill.runtime.stage import (
    Pod,
    Scope,
    Stage,
    Work,
    check_unique_names,
    parsed_items,
    setting,
)
from tokenmill.storage.layout import EVAL_INDEX
from tokenmill.storage.outputs import StageReport


@dataclass(frozen=True)
class EvaluationSettings:
    sets: list[dict] = setting(
        [],
        "Evaluation sets recipes can decontaminate against (clean.decontaminate): {name, path: "
        "a JSONL, Parquet or text file (a lake key, or a path or URI under "
        "TOKENMILL_EVAL_PATHS), fields: the fields holding an item's text (default [text]), "
        "id_field: the field naming an item (default: its line), sha256: the file's, pinned "
        "(optional)}",
    )

    def __post_init__(self):
        check_unique_names([evalset.name for evalset in self.declared()], "evaluation.sets")

    def declared(self) -> list[EvalSet]:
        return parsed_items(self.sets, EvalSet.parse, "evaluation.sets")


def run(work: Work) -> StageReport:
    settings = work.settings or EvaluationSettings()
    report = StageReport()
    sets = {}
    for evalset in settings.declared():
        sha256 = sha256_of(work.lake, evalset)
        counts = build_index(work.lake, evalset, sha256)
        sets[evalset.name] = {"sha256": sha256, "path": evalset.path} | counts
        report.records_in += counts["items"]
    report.records_out = report.records_in
    report.counts["sets"] = sets
    with work.writer(report) as out:
        out.open(SETS_FILE).write(json.dumps(sets, sort_keys=True).encode())
    return report


STAGE = Stage(
    name=EVAL_INDEX,
    scope=Scope.LAKE,
    run=run,
    settings=EvaluationSettings,
    group="extract",  # with the other stages every recipe shares
    kinds=("parquet",),
    pod=Pod("1", "2Gi", "2", "4Gi"),
    shared=True,
    follows_settings=True,
    idle=lambda settings: not settings.sets,
    data_files=(SETS_FILE,),
    description="The declared evaluation sets' items and normalized words, one index per "
    "version of each set file (its SHA-256): what recipes decontaminate their documents against.",
)
