"""Resources as the deployment configured them, closed to run config."""

from __future__ import annotations

from dagster import (
    ConfigurableIOManager,
    ConfigurableResource,
    IOManagerDefinition,
    ResourceDefinition,
    build_init_resource_context,
)

from tokenmill.dagster_internals import resource_config


def locked(resource: ConfigurableResource | ConfigurableIOManager) -> ResourceDefinition:
    """``resource`` with the values it was built with, its ``EnvVar`` fields read from the
    environment of the process that runs (as Dagster would), and an empty config schema.

    A ConfigurableResource shows every field in the launchpad with the configured value as a
    mere default: anyone who can open the UI could repoint the lake, lift the workers' memory
    cap or redirect the failure webhook. Here a run config that sets any field is rejected
    before the run starts ("Received unexpected config entry").
    """
    definition = (
        IOManagerDefinition if isinstance(resource, ConfigurableIOManager) else ResourceDefinition
    )

    def initialized(context):
        # Dagster's `process_config_and_initialize_cm`, but with the instance of the context
        # that initializes it: without one, Dagster builds an ephemeral instance (an in-memory
        # SQLite database and its migrations) for every resource of every sensor tick.
        config = resource_config(resource)
        if config is None:  # a Dagster without the private API: its own initialization
            with resource.process_config_and_initialize_cm() as value:
                yield value
            return
        with (
            build_init_resource_context(config=config, instance=context.instance) as init,
            resource.from_resource_context_cm(
                init, nested_resources=resource.nested_resources
            ) as value,  # with its teardown, if any
        ):
            yield value

    return definition(
        resource_fn=initialized,
        config_schema={},
        description=f"{type(resource).__name__}, set by the deployment (not by run config): "
        f"{(type(resource).__doc__ or '').strip()}",
    )
