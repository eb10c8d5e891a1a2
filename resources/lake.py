"""The data lake as a Dagster resource: a local directory by default, S3 in production."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field

from tokenmill.storage.lake import Lake


class LakeResource(ConfigurableResource):
    """Where every stage reads and writes. Credentials for S3 come from the environment
    (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the pod's service account), never config."""

    url: str = Field(description="Lake root: a directory, file:///dir or s3://bucket/prefix")
    endpoint_url: str | None = Field(
        default=None, description="S3-compatible endpoint, e.g. http://minio:9000"
    )
    region: str | None = Field(default=None, description="S3 region")
    max_attempts: int = Field(
        default=8, description="S3 request attempts, with exponential backoff between them"
    )

    def get_lake(self) -> Lake:
        return Lake.from_url(
            self.url,
            endpoint_url=self.endpoint_url,
            region=self.region,
            max_attempts=self.max_attempts,
        )
