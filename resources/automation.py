"""Settings of the pipeline's automation: how landed files become units, where alerts go."""

from __future__ import annotations

import json
import os
import threading
import urllib.request

from dagster import ConfigurableResource
from pydantic import Field

MAX_PAYLOAD_BYTES = 64 << 10


def tick_seconds(default: int) -> int:
    """A sensor's minimum interval: `default`, or TOKENMILL_TICK_SECONDS for every sensor (a
    test or a small deployment that wants a landed file through the pipeline sooner)."""
    return int(os.environ.get("TOKENMILL_TICK_SECONDS") or default)


class DiscoveryResource(ConfigurableResource):
    """How the landing sensor and the reconciliation job group landed files into units."""

    files_per_unit: int = Field(
        default=100,
        description="WARC files per unit (partition). A crawl of N files has N / files_per_unit "
        "partitions per asset: keep the total under 100,000",
    )
    max_keys_per_tick: int = Field(
        default=2_000, description="Landing-zone keys listed per sensor tick, at most"
    )


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a redirect is answered as the error it is, never followed


class AlertsResource(ConfigurableResource):
    """Where run failures are posted (a Slack-style incoming webhook), if anywhere. The URL
    comes from a Secret through TOKENMILL_FAILURE_WEBHOOK in the Helm deployment."""

    webhook_url: str | None = Field(default=None, description="POST failures here as JSON")
    timeout_s: float = Field(default=10.0, description="Deadline for the whole post")

    def post(self, payload: dict) -> bool:
        """Post `payload` (cut to MAX_PAYLOAD_BYTES); False if unset or not accepted in time."""
        if not self.webhook_url:
            return False
        if not self.webhook_url.startswith(("https://", "http://")):
            raise ValueError("the failure webhook must be an http(s) URL")
        body = json.dumps(payload, default=str).encode()
        if len(body) > MAX_PAYLOAD_BYTES:
            body = json.dumps(
                {k: payload[k] for k in ("run_id", "job", "partition") if k in payload}
                | {"message": str(payload.get("message", ""))[:4000], "truncated": True}
            ).encode()
        request = urllib.request.Request(
            self.webhook_url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        opener = urllib.request.build_opener(_NoRedirects)
        outcome: list[bool] = []

        def send() -> None:
            try:
                with opener.open(request, timeout=self.timeout_s) as response:
                    outcome.append(200 <= response.status < 300)
            except Exception:
                outcome.append(False)

        # The socket timeout bounds each read, not the whole exchange: a thread bounds that.
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        sender.join(self.timeout_s)
        return bool(outcome and outcome[0])
