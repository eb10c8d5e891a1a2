"""The hostile-input classes of the fault table: each class's regression tests, and the
worst real-size cases, run in a fresh process under a CPU limit, with the CPU time and the
peak RSS of every process measured.

    uv run python benchmarks/hostile_cases.py     # ~3 minutes on 2 cores

A process over the CPU limit is killed (SIGXCPU) and its row fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.measure import print_table
from benchmarks.results import record

CPU_LIMIT_S = 60
PROJECT = Path(__file__).resolve().parents[1]
INPUT = {
    "data": "the hostile-input classes' regression tests, and real-size worst cases between two "
    "good pages in one WARC file",
    "cpu_limit_s": CPU_LIMIT_S,
}

# (class, pytest arguments: the class's regression tests)
CLASSES = [
    (
        "WARC reader at read-buffer boundaries, hostile Content-Length, one-member files",
        [
            "tests/test_warc.py::test_member_starting_just_before_a_read_boundary",
            "tests/test_warc.py::test_separator_straddling_a_read_boundary",
            "tests/test_warc.py::test_short_reads_at_every_boundary",
            "tests/test_warc.py::test_hostile_content_length_loses_no_other_record",
            "tests/test_warc.py::test_file_gzipped_as_one_member_streams_records_in_bounded_memory",
        ],
    ),
    (
        "decompression bombs (gzip, deflate, brotli, zstd)",
        ["tests/test_http.py::test_decompression_bombs_stop_at_the_cap"],
    ),
    (
        "negative, malformed and huge chunk sizes",
        [
            "tests/test_http.py::test_malformed_chunk_sizes_end_decoding_without_looping",
            "tests/test_http.py::test_huge_chunk_size_in_a_small_body_keeps_what_is_there",
        ],
    ),
    (
        "nested `<div>`s over the per-record CPU budget",
        [
            "tests/test_faults.py::"
            "test_a_record_over_its_cpu_budget_is_dropped_and_its_neighbours_kept"
        ],
    ),
    (
        'charset=punycode, charset="undefined" and other non-WHATWG labels',
        ["tests/test_http.py::test_charset_labels_outside_whatwg_fall_back_to_detection"],
    ),
    ("brotli body", ["tests/test_http.py::test_brotli_page_is_not_rejected_as_binary"]),
    (
        "zip (or HTML) named .warc.gz",
        [
            "tests/test_warc.py::test_unusable_inputs_fail_naming_the_file",
            "tests/test_faults.py::"
            "test_unusable_file_is_quarantined_by_name_and_flagged_without_retries",
        ],
    ),
    (
        "one bad file beside good ones (zip, tar, HTML, gzipped text, empty, symlinked file or "
        "folder, deleted after registration), every stage, worker processes under the cap",
        [
            "tests/test_bad_files.py::"
            "test_a_bad_file_beside_good_ones_is_quarantined_and_loses_no_good_record"
        ],
    ),
    (
        "symlinks in the landing zone or a declared folder",
        [
            "tests/test_bad_files.py::test_registration_and_discovery_leave_symlinks_out_by_name",
            "tests/test_bad_files.py::test_a_declared_folder_registers_no_symlink_below_it",
        ],
    ),
    (
        "worker errors that do not pickle; a worker killed once, or on every try",
        [
            "tests/test_bad_files.py::"
            "test_a_worker_error_that_does_not_pickle_reaches_the_run_naming_its_file",
            "tests/test_bad_files.py::test_a_worker_killed_once_is_retried_and_the_unit_completes",
            "tests/test_bad_files.py::"
            "test_a_file_that_kills_its_worker_twice_fails_the_unit_naming_it_and_the_signal",
            "tests/test_bad_files.py::"
            "test_the_run_fails_with_the_workers_error_and_file_in_its_message",
        ],
    ),
    (
        "symlink out of a local lake",
        [
            "tests/test_lake.py::test_a_symlink_never_leads_out_of_a_local_lake",
            "tests/test_units.py::"
            "test_a_landing_folder_linked_out_of_the_lake_is_reported_and_skipped",
        ],
    ),
    ("ARC file", ["tests/test_warc.py::test_arc_records_read_as_responses"]),
    ("WET file", ["tests/test_warc.py::test_wet_conversion_records_are_extracted_text"]),
    (
        "crawl names with a pipe, control or bidi characters; over-long names",
        [
            "tests/test_units.py::"
            "test_hostile_crawl_and_file_names_are_reported_and_the_rest_registered",
            "tests/test_lake.py::test_path_like_partition_keys_are_refused",
        ],
    ),
    (
        "same base name in two folders; .tmp- in a name",
        [
            "tests/test_units.py::"
            "test_same_base_names_and_tmp_in_names_are_distinct_registered_files"
        ],
    ),
    (
        "plug-in filter from run config outside the allowed modules",
        [
            "tests/test_filters.py::test_plugins_only_from_allowed_modules",
            "tests/test_filters.py::test_plugin_allow_list_matches_whole_module_names",
        ],
    ),
    (
        "run config repointing the lake (or workers, discovery, alerts)",
        ["tests/test_automation.py::test_run_config_cannot_repoint_the_deployments_resources"],
    ),
    (
        "tokenizer path outside the lake and the allow-list (/etc/passwd)",
        [
            "tests/test_tokenize.py::"
            "test_tokenizer_paths_outside_the_lake_and_the_allow_list_are_refused",
            "tests/test_tokenize.py::test_changing_the_tokenizer_makes_tokenized_shards_stale",
        ],
    ),
    (
        "NFC of many combining marks; e-mail masker on a.a.a…@ and a-a-…@b-b-…",
        ["tests/test_hostile_text.py"],
    ),
    (
        "a run that hangs (dagster/max_runtime)",
        ["tests/test_automation.py::test_every_run_has_a_maximum_runtime"],
    ),
]

# Real-size worst cases, run through the stages (functions of benchmarks/hostile_worst.py)
WORST = [
    ("gzip bomb: 1 GB of zeros in a 1 MB body, between two good pages", "gzip_bomb"),
    ("brotli bomb: 1 GB in a 1 KB body, between two good pages", "brotli_bomb"),
    ("100,000 nested `<div>`s (0.5 MB), default 20 s budget", "nested_divs"),
    ("8 MB page: prose, 1 M combining marks, a.a.a…@ runs", "huge_document"),
]

CHILD = """
import json, re, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_CPU, (limit, limit))
outcome = {}
if sys.argv[2] == "pytest":
    import pytest
    class Count:
        def __init__(self):
            self.outcomes = []
        def pytest_runtest_logreport(self, report):
            if report.when == "call" or report.outcome != "passed":
                self.outcomes.append(report.outcome)
    count = Count()
    args = ["-q", "-p", "no:cacheprovider", "-p", "no:warnings", *sys.argv[3:]]
    outcome["exit"] = int(pytest.main(args, plugins=[count]))
    outcome["outcomes"] = count.outcomes
else:
    from benchmarks import hostile_worst
    outcome.update(getattr(hostile_worst, sys.argv[3])())
from tokenmill.runtime import parts  # its worker pools outlive runs: end them, so they are counted
for pool in parts._pools.values():
    pool.shutdown(wait=True)
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
hwm = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
outcome.update(
    cpu_s=me.ru_utime + me.ru_stime,
    workers_cpu_s=kids.ru_utime + kids.ru_stime,
    peak_mb=max(hwm, kids.ru_maxrss) / 1024,
)
print("\\n" + json.dumps(outcome))
"""


def run_child(*args: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(CPU_LIMIT_S), *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode < 0:
        return {"killed": -result.returncode, "cpu_s": CPU_LIMIT_S, "peak_mb": 0}
    try:
        return json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": (result.stderr or result.stdout)[-500:], "cpu_s": 0, "peak_mb": 0}


def measure_cell(outcome: dict) -> str:
    return (
        f"CPU {outcome['cpu_s']:.1f} s (workers {outcome.get('workers_cpu_s', 0):.1f} s), "
        f"peak RSS {outcome['peak_mb']:.0f} MB"
    )


def class_rows() -> list[dict]:
    rows = []
    for name, tests in CLASSES:
        outcome = run_child("pytest", *tests)
        outcomes = outcome.get("outcomes", [])
        passed = outcomes.count("passed")
        rows.append(
            {
                "fault": name,
                "trials": len(outcomes),
                "passed": passed,
                "skipped": outcomes.count("skipped"),
                "ok": outcome.get("exit") in (0, 5) and "killed" not in outcome,
                "measured": measure_cell(outcome),
                "tests": ", ".join(t.split("::")[-1] if "::" in t else t for t in tests),
                "outcome": outcome,
            }
        )
    return rows


def worst_rows() -> list[dict]:
    rows = []
    for name, function in WORST:
        outcome = run_child("worst", function)
        rows.append(
            {
                "fault": name,
                "ok": bool(outcome.get("ok")) and "killed" not in outcome,
                "measured": measure_cell(outcome),
                "detail": outcome.get("detail", outcome.get("error", "")),
                "outcome": outcome,
            }
        )
    return rows


def main() -> dict:
    """Print the tables and the JSON object of their figures; return the object."""
    classes, worst = class_rows(), worst_rows()
    print_table(
        f"Hostile input classes (each under a {CPU_LIMIT_S} s CPU limit per process)",
        ["class", "tests passed", "CPU and peak RSS", "regression tests"],
        [
            [
                r["fault"],
                f"{r['passed']}/{r['trials']}"
                + (f" ({r['skipped']} skipped)" if r["skipped"] else ""),
                r["measured"],
                r["tests"],
            ]
            for r in classes
        ],
    )
    print_table(
        "Worst real-size cases, through raw_crawl and cleaned",
        ["case", "good records kept", "CPU and peak RSS", "outcome"],
        [[r["fault"], "yes" if r["ok"] else "NO", r["measured"], r["detail"]] for r in worst],
    )
    figures = {
        "classes": [r["outcome"] | {"fault": r["fault"]} for r in classes],
        "worst": [r["outcome"] | {"fault": r["fault"]} for r in worst],
    }
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__).parse_args()
    record("hostile_cases", main(), INPUT)
