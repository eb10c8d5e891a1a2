"""Resources as the deployment configured them, closed to run config."""

from __future__ import annotations

from dagster import ConfigurableResource, ResourceDefinition


def locked(resource: ConfigurableResource) -> ResourceDefinition:
    """``resource`` with the values it was built with, its ``EnvVar`` fields read from the
    environment of the process that runs (as Dagster would), and an empty config schema.

    A ConfigurableResource shows every field in the launchpad with the configured value as a
    mere default: anyone who can open the UI could repoint the lake, lift the workers' memory
    cap or redirect the failure webhook. Here a run config that sets any field is rejected
    before the run starts ("Received unexpected config entry").
    """
    return ResourceDefinition(
        resource_fn=lambda _context: resource.process_config_and_initialize(),
        config_schema={},
        description=f"{type(resource).__name__}, set by the deployment (not by run config): "
        f"{(type(resource).__doc__ or '').strip()}",
    )
