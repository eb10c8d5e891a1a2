"""Kubernetes pod resources per stage, as `dagster-k8s/config` tags, from each stage's `pod`.

Two places read them. With the per-step `k8s_job_executor` (the Helm deployment's executor),
every asset step runs in its own pod sized by its op tags (`op_tags`), whatever started the
run: a job, the automation, a backfill. With one pod per run, the run pod is sized by the
job's tags, which must cover the heaviest stage the job runs: that is `run_tags(*stages)`.
"""

from __future__ import annotations

import re

from tokenmill.runtime.stage import Stage
from tokenmill.stages import STAGES

K8S_CONFIG = "dagster-k8s/config"
STAGE_TAG = "tokenmill/stage"
MAX_RUNTIME_TAG = "dagster/max_runtime"  # seconds; enforced by run monitoring
STAGE_RESOURCES = {stage.name: stage.pod.resources() for stage in STAGES}
STAGE_MAX_RUNTIME = {stage.name: stage.max_runtime_s for stage in STAGES}

QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti)?$")
SCALE = {None: 1, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: str) -> float:
    """A Kubernetes quantity ("500m", "2", "16Gi") as a number, to compare two of them."""
    match = QUANTITY.match(text)
    if not match:
        raise ValueError(f"unsupported Kubernetes quantity {text!r}")
    return float(match[1]) * SCALE[match[2]]


def op_tags(stage: Stage) -> dict:
    """The asset's tags: its pod's resources when each step runs in its own pod."""
    return {
        K8S_CONFIG: {"container_config": {"resources": stage.pod.resources()}},
        STAGE_TAG: stage.name,
    }


def run_tags(*stages: str) -> dict:
    """A job's tags: a run pod large enough for each of its stages, its queue key and the
    longest its stages may run one after another."""
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
        MAX_RUNTIME_TAG: str(sum(STAGE_MAX_RUNTIME[stage] for stage in stages)),
    }
