"""Kubernetes pod resources per stage, as `dagster-k8s/config` tags, from each stage's `pod`.

Two places read them. With the per-step `k8s_job_executor` (the Helm deployment's executor),
every asset step runs in its own pod sized by its op tags (`op_tags`), whatever started the
run: a job, the automation, a backfill. With one pod per run, the run pod is sized by the
job's tags, which must cover the heaviest stage the job runs: that is `run_tags(*stages)`.
"""

from __future__ import annotations

import re

from tokenmill.runtime.stage import Stage
from tokenmill.stages import STAGES, stage_named

K8S_CONFIG = "dagster-k8s/config"
STAGE_TAG = "tokenmill/stage"
MAX_RUNTIME_TAG = "dagster/max_runtime"  # seconds; enforced by run monitoring
QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti)?$")
SCALE = {None: 1, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: str) -> float:
    """A Kubernetes quantity ("500m", "2", "16Gi") as a number, to compare two of them."""
    match = QUANTITY.match(text)
    if not match:
        raise ValueError(f"unsupported Kubernetes quantity {text!r}")
    return float(match[1]) * SCALE[match[2]]


def merged(resources: list[dict[str, dict[str, str]]]) -> dict[str, dict[str, str]]:
    """Requests and limits that cover each of ``resources``: the largest of each amount."""
    found: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for each in resources:
        for kind, amounts in each.items():
            for name, amount in amounts.items():
                current = found[kind].get(name)
                if current is None or quantity(amount) > quantity(current):
                    found[kind][name] = amount
    return found


def step_resources(stage: Stage) -> dict[str, dict[str, str]]:
    """A stage's pod: its own `pod`, large enough also for the stage it feeds (`Stage.feeds`),
    whose work a run making both does in this stage's step (one pass over each file)."""
    fed = [stage_named(stage.feeds).pod.resources()] if stage.feeds else []
    return merged([stage.pod.resources(), *fed])


STAGE_RESOURCES = {stage.name: step_resources(stage) for stage in STAGES}
STAGE_MAX_RUNTIME = {stage.name: stage.max_runtime_s for stage in STAGES}


def op_tags(stage: Stage) -> dict:
    """The asset's tags: its pod's resources when each step runs in its own pod."""
    return {
        K8S_CONFIG: {"container_config": {"resources": step_resources(stage)}},
        STAGE_TAG: stage.name,
    }


def run_tags(*stages: str) -> dict:
    """A job's tags: a run pod large enough for each of its stages, its queue key and the
    longest its stages may run one after another."""
    unknown = set(stages) - set(STAGE_RESOURCES)
    if unknown:
        raise KeyError(f"no Kubernetes resources for stages {sorted(unknown)}")
    stages = tuple(stage for stage in STAGE_RESOURCES if stage in stages)  # lineage order
    return {
        K8S_CONFIG: {
            "container_config": {"resources": merged([STAGE_RESOURCES[s] for s in stages])}
        },
        STAGE_TAG: "+".join(stages),
        MAX_RUNTIME_TAG: str(sum(STAGE_MAX_RUNTIME[stage] for stage in stages)),
    }
