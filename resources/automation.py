"""Settings of the pipeline's automation: how landed files become shards, where alerts go."""

from __future__ import annotations

import json
import urllib.request

from dagster import ConfigurableResource
from pydantic import Field


class DiscoveryResource(ConfigurableResource):
    """How the landing sensor and the reconciliation job group landed files into shards."""

    files_per_shard: int = Field(default=2, description="WARC files per shard")
    max_keys_per_tick: int = Field(
        default=2_000, description="Landing-zone keys listed per sensor tick, at most"
    )


class AlertsResource(ConfigurableResource):
    """Where run failures are posted (a Slack-style incoming webhook), if anywhere."""

    webhook_url: str | None = Field(default=None, description="POST failures here as JSON")
    timeout_s: float = Field(default=10.0)

    def post(self, payload: dict) -> bool:
        if not self.webhook_url:
            return False
        request = urllib.request.Request(
            self.webhook_url,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return 200 <= response.status < 300
