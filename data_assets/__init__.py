"""The Dagster layer of tokenmill: assets, partitions, jobs, and the one `Definitions`."""

import warnings

from dagster import BetaWarning

# backfill_policy, MultiToSingleDimensionPartitionMapping and AutomationConditionSensorDefinition
# are marked beta; the code relies on them knowingly, so their warnings are noise in every run.
warnings.filterwarnings("ignore", category=BetaWarning)
