"""Values the steps of one run hand each other, kept in the lake: on Kubernetes each step is a
pod of its own, so a step's local disk is no place for them."""

from dagster import ConfigurableIOManager, InputContext, OutputContext
from tokenmill.resources.lake import LakeResource

STEP_IO = "step_io"  # its resource key
STEPS = "_steps"  # <STEPS>/<run id>/<step key>/<output>[/<mapping key>].json


class LakeStepIOManager(ConfigurableIOManager):
    """Small JSON values (a share of part names, a summary) between a fanned-out stage's steps."""

    lake: LakeResource

    def _key(self, context: OutputContext) -> str:
        return f"{STEPS}/{'/'.join(context.get_identifier())}.json"

    def handle_output(self, context: OutputContext, obj) -> None:
        self.lake.get_lake().write_json(self._key(context), obj)

    def load_input(self, context: InputContext):
        return self.lake.get_lake().read_json(self._key(context.upstream_output))
