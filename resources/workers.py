"""How many worker processes a stage run uses, and how much memory each may take."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field

from tokenmill.runtime.parts import available_cpus


class WorkersResource(ConfigurableResource):
    """Worker processes per run: by default one per CPU the run's process may use (its affinity
    and its cgroup's CPU quota, i.e. the pod's CPU limit)."""

    processes: int | None = Field(
        default=None, description="Worker processes per run; unset: one per available CPU"
    )
    memory_limit_mb: int | None = Field(
        default=4096,
        description="Address-space cap per worker process, in MiB (a runaway record fails "
        "its worker, which is retried, instead of the pod); unset: none",
    )

    def count(self) -> int:
        return self.processes or available_cpus()

    def memory_limit_bytes(self) -> int | None:
        return self.memory_limit_mb << 20 if self.memory_limit_mb else None
