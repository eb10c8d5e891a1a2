"""Kubernetes pod resources per stage, as `dagster-k8s/config` tags.

Two places read them. With the per-step `k8s_job_executor`, every asset runs in its own pod
sized by its op tags (`op_tags`). With one pod per run (the K8sRunLauncher's default executor),
the run pod is sized by the job's tags, which must cover the heaviest stage the job runs: that
is `run_tags(*stages)`. `tokenmill/stage` lets the run queue limit concurrent runs per job.
"""

from __future__ import annotations

import re

K8S_CONFIG = "dagster-k8s/config"
STAGE_TAG = "tokenmill/stage"


def resources(cpu: str, memory: str, cpu_limit: str, memory_limit: str) -> dict:
    return {
        "requests": {"cpu": cpu, "memory": memory},
        "limits": {"cpu": cpu_limit, "memory": memory_limit},
    }


# Extraction/filtering (cleaned) and tokenization are CPU-bound; clustering holds a crawl's band
# buckets in memory; copying WARCs and filtering duplicates mostly wait on the object store.
STAGE_RESOURCES = {
    "raw_crawl": resources("500m", "1Gi", "1", "2Gi"),
    "cleaned": resources("4", "4Gi", "4", "6Gi"),
    "dedup_signatures": resources("2", "2Gi", "2", "3Gi"),
    "dedup_clusters": resources("1", "16Gi", "2", "24Gi"),
    "deduplicated": resources("500m", "2Gi", "1", "3Gi"),
    "tokenizer": resources("2", "4Gi", "4", "8Gi"),
    "tokenized_shards": resources("4", "4Gi", "4", "6Gi"),
}

QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti)?$")
SCALE = {None: 1, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: str) -> float:
    """A Kubernetes quantity ("500m", "2", "16Gi") as a number, to compare two of them."""
    match = QUANTITY.match(text)
    if not match:
        raise ValueError(f"unsupported Kubernetes quantity {text!r}")
    return float(match[1]) * SCALE[match[2]]


def op_tags(stage: str) -> dict:
    """The asset's tags: its pod's resources when each step runs in its own pod."""
    return {K8S_CONFIG: {"container_config": {"resources": STAGE_RESOURCES[stage]}}}


def run_tags(*stages: str) -> dict:
    """A job's tags: a run pod large enough for each of its stages, and its queue key."""
    unknown = set(stages) - set(STAGE_RESOURCES)
    if unknown:
        raise KeyError(f"no Kubernetes resources for stages {sorted(unknown)}")
    stages = tuple(stage for stage in STAGE_RESOURCES if stage in stages)  # lineage order
    merged: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for stage in stages:
        for kind, amounts in STAGE_RESOURCES[stage].items():
            for name, amount in amounts.items():
                current = merged[kind].get(name)
                if current is None or quantity(amount) > quantity(current):
                    merged[kind][name] = amount
    return {
        K8S_CONFIG: {"container_config": {"resources": merged}},
        STAGE_TAG: "+".join(stages),
    }
