"""The Kubernetes deployment, checked offline: the Helm values against the official charts'
schemas, the instance the chart renders against helm/dagster-instance.yaml, and the Job and Pod
specs dagster-k8s builds for every stage, validated with kubernetes-validate."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import jsonschema
import kubernetes
import kubernetes_validate
import pytest
import yaml
from dagster import DagsterRun
from dagster._config import process_config
from dagster._core.execution.api import create_execution_plan
from dagster._core.execution.plan.state import KnownExecutionState
from dagster._core.instance.config import dagster_instance_config
from dagster._core.storage.tags import (
    ASSET_EVALUATION_ID_TAG,
    AUTOMATION_CONDITION_TAG,
    BACKFILL_ID_TAG,
    PARTITION_NAME_TAG,
    SENSOR_NAME_TAG,
)
from dagster._core.system_config.objects import ResolvedRunConfig
from dagster_aws.s3.compute_log_manager import S3ComputeLogManager
from dagster_k8s import K8sRunLauncher
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import (
    UserDefinedDagsterK8sConfig,
    construct_dagster_k8s_job,
    get_job_name_from_run_id,
    get_k8s_job_name,
    get_user_defined_k8s_config,
)
from tokenmill.data_assets.datasets import Catalog
from tokenmill.data_assets.jobs import stage_jobs
from tokenmill.data_assets.k8s import K8S_CONFIG, STAGE_RESOURCES, STAGE_TAG, quantity, run_tags
from tokenmill.resources.lake import LakeResource

from testkit.datasets import node
from tokenmill.dedup.settings import DedupSettings
from tokenmill.definitions import STEP_SERVICE_ACCOUNT, build_definitions
from tokenmill.stages import stage_named

PROJECT_DIR = Path(__file__).resolve().parents[1]
HELM = PROJECT_DIR / "helm"
SCHEMAS = Path(__file__).resolve().parent / "helm_schema"
KUBERNETES_VERSION = "1.33.0"
RELEASE = NAMESPACE = "tokenmill"
CHART_DAGSTER_HOME = "/opt/dagster/dagster_home"  # global.dagsterHome in the chart's values.yaml
POSTGRES_PARAMS = yaml.safe_load((HELM / "values.yaml").read_text())["postgresql"][
    "postgresqlParams"
]


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def values() -> dict:
    return load(HELM / "values.yaml")


@pytest.fixture(scope="module")
def user_values() -> dict:
    return load(HELM / "values-user-deployments.yaml")


# --------------------------------------------------------------------------------------------
# Helm values


def unknown_keys(value, schema: dict, root: dict, path: str = "") -> list[str]:
    """Keys of `value` that the schema does not define, wherever the schema lists properties."""
    while "$ref" in schema:
        schema = root["definitions"][schema["$ref"].rsplit("/", 1)[1]]
    for option in schema.get("anyOf", []):
        if option.get("type") != "null" and "$ref" in option or "properties" in option:
            return unknown_keys(value, option, root, path)
    found = []
    if isinstance(value, dict) and "properties" in schema:
        for key, item in value.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += unknown_keys(item, schema["properties"][key], root, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            found += unknown_keys(item, schema["items"], root, f"{path}[{index}]")
    return found


@pytest.mark.parametrize(
    "values_file, schema_file",
    [
        ("values.yaml", "dagster.schema.json"),
        ("values-user-deployments.yaml", "dagster-user-deployments.schema.json"),
    ],
)
def test_helm_values_use_only_keys_the_official_charts_define(values_file, schema_file):
    values = load(HELM / values_file)
    schema = json.loads((SCHEMAS / schema_file).read_text())
    jsonschema.Draft7Validator(schema).validate(values)
    assert unknown_keys(values, schema, schema) == []


def test_schema_check_catches_a_misspelled_key(values):
    schema = json.loads((SCHEMAS / "dagster.schema.json").read_text())
    broken = json.loads(json.dumps(values))
    broken["runLauncher"]["config"]["k8sRunLauncher"]["envSecret"] = [{"name": "x"}]
    broken["postgresql"]["postgresqlHostname"] = "db"
    assert sorted(unknown_keys(broken, schema, schema)) == [
        ".postgresql.postgresqlHostname",
        ".runLauncher.config.k8sRunLauncher.envSecret",
    ]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(broken)


# --------------------------------------------------------------------------------------------
# The instance the chart renders


def render_instance(values: dict) -> dict:
    """dagster.yaml as the chart's templates render it (templates/configmap-instance.yaml and
    templates/helpers/instance/*.tpl of dagster-io/dagster), for the sections we set."""
    pg, glob = values["postgresql"], values["global"]
    postgres_db = {
        "username": pg["postgresqlUsername"],
        "password": {"env": "DAGSTER_PG_PASSWORD"},
        "hostname": pg["postgresqlHost"],
        "db_name": pg["postgresqlDatabase"],
        "port": pg["service"]["port"],
        "params": pg["postgresqlParams"],
    }

    def storage(module: str, cls: str) -> dict:
        return {"module": module, "class": cls, "config": {"postgres_db": postgres_db}}

    k8s = values["runLauncher"]["config"]["k8sRunLauncher"]
    launcher = {
        "load_incluster_config": k8s["loadInclusterConfig"],
        "job_namespace": k8s.get("jobNamespace") or NAMESPACE,
        "image_pull_policy": k8s["imagePullPolicy"],
        "service_account_name": glob["serviceAccountName"],
        "dagster_home": glob.get("dagsterHome", CHART_DAGSTER_HOME),
        "instance_config_map": f"{RELEASE}-dagster-instance",
        "postgres_password_secret": glob["postgresqlSecretName"],
    }
    if k8s.get("envConfigMaps"):
        launcher["env_config_maps"] = [c["name"] for c in k8s["envConfigMaps"]]
    if k8s.get("envSecrets"):
        launcher["env_secrets"] = [s["name"] for s in k8s["envSecrets"]]
    for key, name in [
        ("envVars", "env_vars"),
        ("volumeMounts", "volume_mounts"),
        ("volumes", "volumes"),
        ("labels", "labels"),
        ("resources", "resources"),
        ("schedulerName", "scheduler_name"),
        ("securityContext", "security_context"),
    ]:
        if k8s.get(key):
            launcher[name] = k8s[key]
    if k8s.get("failPodOnRunFailure"):
        launcher["fail_pod_on_run_failure"] = True
    if k8s.get("runK8sConfig"):
        snake = {
            "containerConfig": "container_config",
            "podSpecConfig": "pod_spec_config",
            "podTemplateSpecMetadata": "pod_template_spec_metadata",
            "jobSpecConfig": "job_spec_config",
            "jobMetadata": "job_metadata",
        }
        launcher["run_k8s_config"] = {snake[k]: v for k, v in k8s["runK8sConfig"].items() if v}

    s3_logs = values["computeLogManager"]["config"]["s3ComputeLogManager"]
    compute_logs = {  # templates/helpers/instance/_compute-log-manager.tpl, S3ComputeLogManager
        snake: s3_logs[key]
        for key, snake in [
            ("bucket", "bucket"),
            ("localDir", "local_dir"),
            ("prefix", "prefix"),
            ("useSsl", "use_ssl"),
            ("verify", "verify"),
            ("verifyCertPath", "verify_cert_path"),
            ("endpointUrl", "endpoint_url"),
            ("skipEmptyFiles", "skip_empty_files"),
        ]
        if s3_logs.get(key)
    }
    assert values["computeLogManager"]["type"] == "S3ComputeLogManager"

    daemon = values["dagsterDaemon"]
    queued = daemon["runCoordinator"]["config"]["queuedRunCoordinator"]
    return (
        {
            "schedule_storage": storage(
                "dagster_postgres.schedule_storage", "PostgresScheduleStorage"
            ),
            "run_launcher": {
                "module": "dagster_k8s",
                "class": "K8sRunLauncher",
                "config": launcher,
            },
            "compute_logs": {
                "module": "dagster_aws.s3.compute_log_manager",
                "class": "S3ComputeLogManager",
                "config": compute_logs,
            },
            "run_storage": storage("dagster_postgres.run_storage", "PostgresRunStorage"),
            "event_log_storage": storage("dagster_postgres.event_log", "PostgresEventLogStorage"),
            "run_coordinator": {
                "module": "dagster.core.run_coordinator",
                "class": "QueuedRunCoordinator",
                "config": {
                    "max_concurrent_runs": queued.get("maxConcurrentRuns", -1),
                    "tag_concurrency_limits": queued["tagConcurrencyLimits"],
                },
            },
            "run_retries": {"enabled": True, "max_retries": daemon["runRetries"]["maxRetries"]},
            "run_monitoring": {
                "enabled": True,
                "start_timeout_seconds": daemon["runMonitoring"]["startTimeoutSeconds"],
                "max_resume_run_attempts": daemon["runMonitoring"]["maxResumeRunAttempts"],
                "poll_interval_seconds": daemon["runMonitoring"]["pollIntervalSeconds"],
            },
            "telemetry": {"enabled": values["telemetry"]["enabled"]},
        }
        | _sensors(daemon.get("sensors", {}))
        | values.get("additionalInstanceConfig", {})
    )


def _sensors(sensors: dict) -> dict:
    """The chart's `sensors:` section: rendered only when useThreads is set."""
    if not sensors.get("useThreads"):
        return {}
    rendered = {"use_threads": True}
    for key, snake in [("numWorkers", "num_workers"), ("numSubmitWorkers", "num_submit_workers")]:
        if sensors.get(key):
            rendered[snake] = sensors[key]
    return {"sensors": rendered}


STORAGES = ("run_storage", "event_log_storage", "schedule_storage")


def test_chart_renders_the_production_instance(values):
    rendered, production = render_instance(values), load(HELM / "dagster-instance.yaml")
    for section in (
        "run_launcher",
        "compute_logs",
        "run_coordinator",
        "run_retries",
        "run_monitoring",
        "telemetry",
        "sensors",
        "nux",
    ):
        assert rendered[section] == production[section], section
    for section in STORAGES:
        chart, ours = rendered[section], production[section]
        assert (chart["module"], chart["class"]) == (ours["module"], ours["class"])
        chart_db, our_db = chart["config"]["postgres_db"], ours["config"]["postgres_db"]
        # The chart writes the connection literally; our file reads it from the environment.
        assert chart_db.keys() == our_db.keys()
        assert chart_db["password"] == our_db["password"] == {"env": "DAGSTER_PG_PASSWORD"}
        assert chart_db["params"] == our_db["params"]
    assert set(production) == set(rendered)


@pytest.mark.parametrize("source", ["chart", "helm/dagster-instance.yaml"])
def test_instance_configs_pass_dagsters_validation(source, values, tmp_path, monkeypatch):
    config = render_instance(values) if source == "chart" else load(HELM / "dagster-instance.yaml")
    for name, value in {
        "DAGSTER_PG_PASSWORD": "x",
        "DAGSTER_PG_USERNAME": "dagster",
        "DAGSTER_PG_HOST": "db",
        "DAGSTER_PG_DB": "dagster",
        "DAGSTER_PG_PORT": "5432",
    }.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    validated, _ = dagster_instance_config(str(tmp_path))
    assert validated["nux"] == {"enabled": False}  # no welcome dialog over the UI
    launcher = validated["run_launcher"]["config"]
    checked = process_config(K8sRunLauncher.config_type(), launcher)
    assert checked.success, checked.errors
    logs = validated["compute_logs"]
    assert (logs["module"], logs["class"]) == (
        "dagster_aws.s3.compute_log_manager",
        "S3ComputeLogManager",
    )
    checked = process_config(S3ComputeLogManager.config_type(), logs["config"])
    assert checked.success, checked.errors
    limits = validated["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert {"key": "tokenmill/stage", "value": "dedup_clusters", "limit": 1} in limits


# --------------------------------------------------------------------------------------------
# Job and Pod specs built by dagster-k8s


@pytest.fixture(scope="module")
def launcher(values, tmp_path_factory) -> K8sRunLauncher:
    """The K8sRunLauncher of the rendered instance, with an offline kubeconfig instead of the
    in-cluster one (constructing it reads the config; nothing here talks to a cluster)."""
    kubeconfig = tmp_path_factory.mktemp("kube") / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "u", "user": {"token": "unused"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    config = dict(render_instance(values)["run_launcher"]["config"])
    config.update(load_incluster_config=False, kubeconfig_file=str(kubeconfig))
    checked = process_config(K8sRunLauncher.config_type(), config)
    assert checked.success, checked.errors
    return K8sRunLauncher.from_config_value(None, checked.value)


def code_location_context(user_values: dict) -> K8sContainerContext:
    """What includeConfigInLaunchedRuns hands every run: the container context the chart's
    dagsterUserDeployments.k8sContainerContext template builds from the user deployment (its
    `env` map reaches the run through a ConfigMap; here directly, as env vars)."""
    deployment = user_values["deployments"][0]
    return K8sContainerContext(
        image_pull_policy=deployment["image"]["pullPolicy"],
        env_vars=[f"{name}={value}" for name, value in deployment["env"].items()],
        env_secrets=[secret["name"] for secret in deployment["envSecrets"]],
        volume_mounts=deployment.get("volumeMounts"),
        volumes=deployment.get("volumes"),
        resources=deployment.get("resources"),
        namespace=NAMESPACE,
        service_account_name=user_values["global"]["serviceAccountName"],
    )


def image(user_values: dict) -> str:
    spec = user_values["deployments"][0]["image"]
    return f"{spec['repository']}:{spec['tag']}"


def validated(job: kubernetes.client.V1Job) -> tuple[dict, dict]:
    """The Job and its Pod as the API server would receive them, both schema-validated."""
    manifest = kubernetes.client.ApiClient().sanitize_for_serialization(job)
    pod = {"apiVersion": "v1", "kind": "Pod", **manifest["spec"]["template"]}
    for resource in (manifest, pod):
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
    return manifest, pod


RUN_SERVICE_ACCOUNT = "tokenmill-run"  # step pods and the code server: no Role, no token
COORDINATOR_SERVICE_ACCOUNT = "tokenmill-run-coordinator"  # run pods: create the step Jobs
WRITABLE_PATHS = ("/tmp", f"{CHART_DAGSTER_HOME}/storage")


def check_hardened(pod: dict) -> None:
    """Non-root, read-only root filesystem with emptyDirs where Dagster and Python write, no
    privilege escalation, no capabilities, the PostgreSQL CA mounted where sslrootcert says."""
    spec = pod["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] > 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    assert len(volumes) == len(spec["volumes"]), "duplicate volume names"
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context.get("privileged") is not True
        assert context["capabilities"] == {"drop": ["ALL"]}
        mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
        assert len(mounts) == len(container["volumeMounts"]), "two mounts at one path"
        for mount in mounts.values():
            assert mount["name"] in volumes, mount
        for path in WRITABLE_PATHS:
            assert "emptyDir" in volumes[mounts[path]["name"]], path
        ca_dir = str(Path(POSTGRES_PARAMS["sslrootcert"]).parent)
        assert mounts[ca_dir].get("readOnly") is True


RECIPES_DIR = "/etc/tokenmill/recipes"


def check_recipes_mounted(pod: dict, env: dict) -> None:
    """The recipes ConfigMap, read-only where TOKENMILL_RECIPES points: every pod that loads
    the code location reads the same recipe files."""
    assert env["TOKENMILL_RECIPES"]["value"] == RECIPES_DIR
    volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
    (container,) = pod["spec"]["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == RECIPES_DIR]
    assert mount.get("readOnly") is True
    assert volumes[mount["name"]]["configMap"]["name"] == "tokenmill-recipes"


def check_pod(pod: dict, expected_resources: dict, step: bool) -> None:
    """A run pod (the run's coordinator, which starts its steps as Jobs: a service account with
    a Role and its token) or a step pod (no Role, no token)."""
    (container,) = pod["spec"]["containers"]
    assert container["resources"] == expected_resources
    assert {"secretRef": {"name": "tokenmill-s3"}} in container["envFrom"]
    env = {item["name"]: item for item in container["env"]}
    assert env["DAGSTER_PG_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "tokenmill-postgresql",
        "key": "postgresql-password",
    }
    assert env["TOKENMILL_LAKE_URL"]["value"].startswith("s3://")
    assert env["TOKENMILL_EXECUTOR"]["value"] == "k8s"
    check_recipes_mounted(pod, env)
    if step:
        assert pod["spec"]["serviceAccountName"] == RUN_SERVICE_ACCOUNT
        assert pod["spec"]["automountServiceAccountToken"] is False
    else:
        assert pod["spec"]["serviceAccountName"] == COORDINATOR_SERVICE_ACCOUNT
        assert pod["spec"]["automountServiceAccountToken"] is True
    check_hardened(pod)


@pytest.fixture(scope="module")
def k8s_defs():
    """The code location as the user deployment loads it (TOKENMILL_EXECUTOR=k8s)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TOKENMILL_EXECUTOR", "k8s")
        return build_definitions(LakeResource(url="s3://tokenmill-lake/prod"))


def executor_context(job) -> K8sContainerContext:
    """The container context k8s_job_executor gives every step of `job`'s runs, from the
    executor config the definitions resolve (dagster_k8s.executor.k8s_job_executor)."""
    config = ResolvedRunConfig.build(job, {}).execution.execution_engine_config
    return K8sContainerContext(
        image_pull_policy=config.get("image_pull_policy"),
        image_pull_secrets=config.get("image_pull_secrets"),
        service_account_name=config.get("service_account_name"),
        env_config_maps=config.get("env_config_maps"),
        env_secrets=config.get("env_secrets"),
        env_vars=config.get("env_vars"),
        volume_mounts=config.get("volume_mounts"),
        volumes=config.get("volumes"),
        labels=config.get("labels"),
        namespace=config.get("job_namespace"),
        resources=config.get("resources"),
        scheduler_name=config.get("scheduler_name"),
        security_context=config.get("security_context"),
        run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(config.get("step_k8s_config", {})),
    )


def stage_steps(job, stage: str, shares: int = 1) -> dict[str, dict]:
    """The steps of `stage` in a run of `job`, with their op tags, as the run's execution plan
    lists them once a fanned-out stage's plan step yielded `shares` shares."""
    stage = node(stage)
    plan_step = f"{stage}.{stage}_plan"
    known = KnownExecutionState(
        dynamic_mappings={plan_step: {"result": list(map(str, range(shares)))}}
    )
    plan = create_execution_plan(job, known_state=known)
    return {
        step.key: step.tags
        for step in plan.get_all_steps_in_topo_order()
        # (the plan keeps the unresolved template of mapped steps too: "part[?]")
        if (step.key == stage or step.key.startswith(f"{stage}.")) and "[?]" not in step.key
    }


def step_pod(run: DagsterRun, job, step: str, tags: dict, launcher, user_values) -> dict:
    """The Job of `step` (with op tags `tags`) in `run` as K8sStepHandler builds it
    (_get_container_context and launch_step, without the API call): the launcher's config, the
    code location's container context, the executor's, then the step's op tags."""
    context = (
        K8sContainerContext.create_for_run(run, launcher, include_run_tags=False)
        .merge(code_location_context(user_values))
        .merge(executor_context(job))
        .merge(K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(tags)))
    )
    _, pod = validated(
        construct_dagster_k8s_job(
            job_config=context.get_k8s_job_config(image(user_values), launcher),
            args=["dagster", "api", "execute_step"],
            job_name=f"dagster-step-{get_k8s_job_name(run.run_id, step)}",
            component="step_worker",
            user_defined_k8s_config=context.run_k8s_config,
            labels={"dagster/op": step, "dagster/run-id": run.run_id},
        )
    )
    return pod


def run_pod(run: DagsterRun, launcher, user_values) -> tuple[dict, dict]:
    """The run's Job as K8sRunLauncher._launch_k8s_job_with_args builds it, without the API
    call: create_for_run merges the launcher's config, then the code location's container
    context, then the run's tags."""
    context = K8sContainerContext.create_for_run(run, launcher, include_run_tags=False).merge(
        code_location_context(user_values).merge(
            K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(run.tags))
        )
    )
    return validated(
        construct_dagster_k8s_job(
            job_config=context.get_k8s_job_config(
                job_image=image(user_values), run_launcher=launcher
            ),
            args=["dagster", "api", "execute_run", "{}"],
            job_name=get_job_name_from_run_id(run.run_id),
            component="run_worker",
            user_defined_k8s_config=context.run_k8s_config,
            labels={"dagster/job": run.job_name, "dagster/run-id": run.run_id},
            env_vars=[{"name": "DAGSTER_RUN_JOB_NAME", "value": run.job_name}],
        )
    )


@pytest.mark.parametrize("job", list(stage_jobs(Catalog.load()).values()), ids=lambda job: job.name)
def test_run_pod_per_job_is_valid_and_sized_for_its_stages(job, k8s_defs, launcher, user_values):
    stages = job.selection.resolve(k8s_defs.resolve_asset_graph())
    stage_names = sorted({key.path[-1] for key in stages})
    assert job.name == f"run_{stage_names[0]}" and len(stage_names) == 1
    tags = k8s_defs.resolve_job_def(job.name).tags
    assert json.loads(tags[K8S_CONFIG]) == run_tags(*stage_names)[K8S_CONFIG]
    assert tags[STAGE_TAG] == run_tags(*stage_names)[STAGE_TAG]
    run = DagsterRun(job_name=job.name, run_id=str(uuid.uuid4()), tags=tags)
    manifest, pod = run_pod(run, launcher, user_values)
    resources = pod["spec"]["containers"][0]["resources"]
    for stage in stage_names:  # the run pod fits every stage it runs
        for kind in ("requests", "limits"):
            for name, amount in STAGE_RESOURCES[stage][kind].items():
                assert quantity(resources[kind][name]) >= quantity(amount)
    check_pod(pod, resources, step=False)
    assert manifest["spec"]["ttlSecondsAfterFinished"] == 86400


@pytest.mark.parametrize("stage", sorted(STAGE_RESOURCES))
def test_step_pod_per_stage_is_valid_and_sized_by_its_op_tags(
    stage, k8s_defs, launcher, user_values
):
    job = k8s_defs.resolve_job_def(f"run_{stage}")
    assert job.executor_def.name == "k8s"
    run = DagsterRun(job_name=job.name, run_id=str(uuid.uuid4()), tags=job.tags)
    steps = stage_steps(job, stage)
    assert len(steps) == (3 if stage_named(stage).fan_out else 1)  # plan, a share, finish
    for step, tags in steps.items():
        pod = step_pod(run, job, step, tags, launcher, user_values)
        check_pod(pod, STAGE_RESOURCES[stage], step=True)
    # its own pod's size, and the size of the stage it feeds, whose work it does in a run
    # making both (one pass over each file)
    own = stage_named(stage)
    needed = [own.pod.resources()]
    if own.feeds:
        needed.append(stage_named(own.feeds).pod.resources())
    for resources in needed:
        for kind, amounts in resources.items():
            for name, amount in amounts.items():
                assert quantity(STAGE_RESOURCES[stage][kind][name]) >= quantity(amount)


def test_parallel_steps_of_a_fanned_out_stage_each_get_the_stages_pod(
    k8s_defs, launcher, user_values
):
    # A run of dedup_clusters with parallel_steps=2: its plan step yields two shares, and the
    # executor launches each mapped part step as a Job of its own, sized like the stage.
    job = k8s_defs.resolve_job_def("run_dedup_clusters")
    config = {"ops": {node("dedup_clusters"): {"config": {"parallel_steps": 2}}}}
    ResolvedRunConfig.build(job, config)  # the setting is part of the stage's run config
    run = DagsterRun(job_name=job.name, run_id=str(uuid.uuid4()), tags=job.tags, run_config=config)
    steps = stage_steps(job, "dedup_clusters", shares=2)
    parts = [step for step in steps if "_part[" in step]
    assert parts == [
        "fineweb_en__dedup_clusters.fineweb_en__dedup_clusters_part[0]",
        "fineweb_en__dedup_clusters.fineweb_en__dedup_clusters_part[1]",
    ]
    names = set()
    for step in parts:
        pod = step_pod(run, job, step, steps[step], launcher, user_values)
        check_pod(pod, STAGE_RESOURCES["dedup_clusters"], step=True)
        names.add(pod["metadata"]["name"])
    assert len(names) == 2  # two Jobs, one per part step


def automation_run(stage: str, partition: str) -> dict:
    """Tags of a run the automation sensor requests (a run of the implicit asset job)."""
    return {
        SENSOR_NAME_TAG: "automation",
        AUTOMATION_CONDITION_TAG: "true",
        ASSET_EVALUATION_ID_TAG: "7",
        PARTITION_NAME_TAG: partition,
    }


def backfill_run(stage: str, partition: str) -> dict:
    """Tags of one run of an asset backfill (one partition per run)."""
    return {BACKFILL_ID_TAG: "abcdefgh", PARTITION_NAME_TAG: partition}


@pytest.mark.parametrize("origin", [automation_run, backfill_run], ids=["automation", "backfill"])
@pytest.mark.parametrize(
    "stage, partition",
    [("dedup_clusters", "CC-MAIN-2026-05"), ("cleaned", "CC-MAIN-2026-05/00042")],
)
def test_steps_of_automation_and_backfill_runs_get_their_stages_pod(
    origin, stage, partition, k8s_defs, launcher, user_values
):
    # Such runs are runs of the implicit asset job: no job tags size them, so their steps must
    # be sized by the asset's op tags, in pods of their own.
    job = k8s_defs.resolve_implicit_global_asset_job_def()
    assert job.executor_def.name == "k8s"
    run = DagsterRun(job_name=job.name, run_id=str(uuid.uuid4()), tags=origin(stage, partition))
    assert K8S_CONFIG not in run.tags
    for step, tags in stage_steps(job, stage).items():
        pod = step_pod(run, job, step, tags, launcher, user_values)
        assert pod["spec"]["containers"][0]["resources"] == stage_named(stage).pod.resources()
        check_pod(pod, stage_named(stage).pod.resources(), step=True)
    # The run's own pod only coordinates: the code location's size (which every run inherits),
    # and the Role to start the step Jobs.
    _, coordinator = run_pod(run, launcher, user_values)
    check_pod(coordinator, user_values["deployments"][0]["resources"], step=False)


def test_step_check_catches_a_step_pod_with_the_coordinators_account(
    k8s_defs, launcher, user_values
):
    job = k8s_defs.resolve_job_def("run_cleaned")
    run = DagsterRun(job_name=job.name, run_id=str(uuid.uuid4()))
    step = node("cleaned")
    pod = step_pod(run, job, step, stage_steps(job, "cleaned")[step], launcher, user_values)
    pod["spec"]["serviceAccountName"] = COORDINATOR_SERVICE_ACCOUNT
    with pytest.raises(AssertionError):
        check_pod(pod, STAGE_RESOURCES["cleaned"], step=True)


def test_heavy_stages_get_the_resources_they_need():
    cpu = {stage: quantity(r["requests"]["cpu"]) for stage, r in STAGE_RESOURCES.items()}
    memory = {stage: quantity(r["requests"]["memory"]) for stage, r in STAGE_RESOURCES.items()}
    # raw_crawl extracts too in a run that makes both stages
    assert cpu["raw_crawl"] == cpu["extracted"] == cpu["tokenized_shards"] == max(cpu.values())
    assert cpu["cleaned"] < cpu["extracted"]  # a filter pass over stored columns
    # Clustering's memory is bounded by its setting; extraction's grows with its workers.
    assert memory["dedup_clusters"] > DedupSettings().cluster_memory_gb * 2**30
    assert memory["extracted"] >= cpu["extracted"] * 2**30
    assert memory["cleaned"] >= cpu["cleaned"] * 2**30


def test_kubernetes_validate_rejects_a_broken_pod(launcher, user_values):
    run = DagsterRun(job_name="x", run_id=str(uuid.uuid4()))
    context = launcher.get_container_context_for_run(run)
    job = construct_dagster_k8s_job(
        job_config=context.get_k8s_job_config(image(user_values), launcher),
        args=[],
        job_name="broken",
        user_defined_k8s_config=context.run_k8s_config,
    )
    manifest = kubernetes.client.ApiClient().sanitize_for_serialization(job)
    manifest["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": ["4"]}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


# --------------------------------------------------------------------------------------------
# Hardening of the chart's pods, service accounts, images, PostgreSQL


def chart_pods(values: dict, user_values: dict) -> dict[str, dict]:
    """The pod specs of the webserver, the daemon and the code server as the charts' templates
    write them (securityContext, volumes, mounts; the instance ConfigMap mount of the
    webserver and the daemon), validated with kubernetes-validate."""
    deployment = user_values["deployments"][0]
    sources = {
        "webserver": values["dagsterWebserver"],
        "daemon": values["dagsterDaemon"],
        "code server": deployment,
    }
    pods = {}
    for name, source in sources.items():
        image = f"{source['image']['repository']}:{source['image']['tag']}"
        mounts, volumes = list(source["volumeMounts"]), list(source["volumes"])
        if name != "code server":
            mounts.append(
                {"name": "dagster-instance", "mountPath": f"{CHART_DAGSTER_HOME}/dagster.yaml"}
            )
            volumes.append({"name": "dagster-instance", "configMap": {"name": "x-instance"}})
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name.replace(" ", "-")},
            "spec": {
                "securityContext": source["podSecurityContext"],
                "containers": [
                    {
                        "name": "dagster",
                        "image": image,
                        "securityContext": source["securityContext"],
                        "volumeMounts": mounts,
                    }
                ],
                "volumes": volumes,
            },
        }
        kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)
        pods[name] = pod
    return pods


def test_webserver_daemon_and_code_server_are_hardened(values, user_values):
    for name, pod in chart_pods(values, user_values).items():
        try:
            check_hardened(pod)
        except (AssertionError, KeyError) as failure:
            raise AssertionError(f"{name}: {failure!r}") from failure


def test_the_code_server_reads_the_recipes_configmap(values, user_values):
    code_server = chart_pods(values, user_values)["code server"]
    env = user_values["deployments"][0]["env"]
    check_recipes_mounted(code_server, {name: {"value": v} for name, v in env.items()})


def test_hardening_check_catches_a_writable_root_filesystem(values, user_values):
    pod = chart_pods(values, user_values)["daemon"]
    pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] = False
    with pytest.raises(AssertionError):
        check_hardened(pod)


def test_webserver_for_viewers_is_read_only(values):
    assert values["dagsterWebserver"]["enableReadOnly"] is True
    # non-root without capabilities: the container port must not be privileged
    assert values["dagsterWebserver"]["service"]["port"] >= 1024


def rbac_documents() -> list[tuple[Path, dict]]:
    return [
        (path, document)
        for path in sorted(HELM.glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if isinstance(document, dict) and "kind" in document
    ]


def test_step_pods_service_account_has_no_rbac(values, user_values):
    (account,) = yaml.safe_load_all((HELM / "service-account-run.yaml").read_text())
    kubernetes_validate.validate(account, KUBERNETES_VERSION, strict=True)
    assert account["metadata"]["name"] == RUN_SERVICE_ACCOUNT == STEP_SERVICE_ACCOUNT
    assert account["automountServiceAccountToken"] is False
    assert values["global"]["serviceAccountName"] != RUN_SERVICE_ACCOUNT  # the RBAC one
    for path, document in rbac_documents():  # no Role or binding of ours names it
        if document["kind"].endswith("Binding"):
            subjects = [s.get("name") for s in document.get("subjects", [])]
            assert RUN_SERVICE_ACCOUNT not in subjects, path


def test_run_coordinators_role_allows_only_what_k8s_job_executor_needs(
    values, user_values, launcher
):
    documents = list(
        yaml.safe_load_all((HELM / "service-account-run-coordinator.yaml").read_text())
    )
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        assert document["metadata"]["namespace"] == NAMESPACE
    by_kind = {document["kind"]: document for document in documents}
    assert set(by_kind) == {"ServiceAccount", "Role", "RoleBinding"}  # namespaced, no Cluster*
    account = by_kind["ServiceAccount"]
    assert account["metadata"]["name"] == COORDINATOR_SERVICE_ACCOUNT
    # The code server and the run pods share it (the chart gives both the code location's
    # account), but only run pods mount its token: the code server's pod does not ask for it.
    assert user_values["global"]["serviceAccountName"] == COORDINATOR_SERVICE_ACCOUNT
    assert account["automountServiceAccountToken"] is False
    code_server = chart_pods(values, user_values)["code server"]
    assert "automountServiceAccountToken" not in code_server["spec"]
    granted = {
        (group, resource, verb)
        for rule in by_kind["Role"]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    needed = {("batch", "jobs", v) for v in ("create", "get", "list", "watch", "delete")} | {
        ("", resource, v) for resource in ("pods", "pods/log") for v in ("get", "list", "watch")
    }
    assert granted == needed
    binding = by_kind["RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": by_kind["Role"]["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": COORDINATOR_SERVICE_ACCOUNT, "namespace": NAMESPACE}
    ]
    # Nothing else of ours binds the coordinator's account, and nothing is cluster-wide.
    for path, document in rbac_documents():
        assert not document["kind"].startswith("Cluster"), path
        if document["kind"].endswith("Binding") and document != binding:
            names = [s.get("name") for s in document.get("subjects", [])]
            assert COORDINATOR_SERVICE_ACCOUNT not in names, path


DIGEST_REFERENCE = re.compile(r"^[a-z0-9.\-/:]+(:[\w.\-]+)?@sha256:[0-9a-f]{64}$")


def test_images_are_pinned_by_digest(values, user_values):
    images = [
        f"{source['image']['repository']}:{source['image']['tag']}"
        for source in (values["dagsterWebserver"], values["dagsterDaemon"])
    ] + [image(user_values)]  # the code server's, which every run and step pod starts from
    for reference in images:
        assert DIGEST_REFERENCE.match(reference), reference
    assert not DIGEST_REFERENCE.match("registry.example.com/tokenmill:0.1.0")


def test_postgres_connections_verify_the_server(values):
    production = load(HELM / "dagster-instance.yaml")
    for params in (POSTGRES_PARAMS, production["run_storage"]["config"]["postgres_db"]["params"]):
        assert params["sslmode"] == "verify-full"
        assert params["sslrootcert"] == POSTGRES_PARAMS["sslrootcert"]


# --------------------------------------------------------------------------------------------
# NetworkPolicies


@pytest.fixture(scope="module")
def network_policies() -> list[dict]:
    policies = list(yaml.safe_load_all((HELM / "network-policies.yaml").read_text()))
    for policy in policies:
        kubernetes_validate.validate(policy, KUBERNETES_VERSION, strict=True)
        assert policy["metadata"]["namespace"] == NAMESPACE
    return policies


def selects(selector: dict, labels: dict) -> bool:
    """A label selector (matchLabels, matchExpressions In/NotIn/Exists) against labels."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        present = key in labels
        matched = {
            "In": present and labels.get(key) in expression.get("values", []),
            "NotIn": labels.get(key) not in expression.get("values", []),
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]
        if not matched:
            return False
    return True


def peer_matches(peer: dict, other: dict) -> bool:
    if "ipBlock" in peer:
        return other["namespace"] is None  # outside the cluster
    if other["namespace"] is None:
        return False
    namespace_ok = (
        selects(peer["namespaceSelector"], other["namespace_labels"])
        if "namespaceSelector" in peer
        else other["namespace"] == NAMESPACE
    )
    return namespace_ok and selects(peer.get("podSelector", {}), other["labels"])


def rule_allows(rule: dict, peers_key: str, other: dict, port: int, protocol: str) -> bool:
    peers = rule.get(peers_key)
    ports = rule.get("ports")
    peer_ok = not peers or any(peer_matches(peer, other) for peer in peers)
    port_ok = not ports or any(
        p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports
    )
    return peer_ok and port_ok


def direction_allows(policies, pod, direction, other, port, protocol) -> bool:
    if pod["namespace"] != NAMESPACE:
        return True  # not governed by these policies
    kind, key, peers = {
        "egress": ("Egress", "egress", "to"),
        "ingress": ("Ingress", "ingress", "from"),
    }[direction]
    applying = [
        p
        for p in policies
        if kind in p["spec"]["policyTypes"] and selects(p["spec"]["podSelector"], pod["labels"])
    ]
    if not applying:
        return True
    return any(
        rule_allows(rule, peers, other, port, protocol)
        for policy in applying
        for rule in policy["spec"].get(key, [])
    )


def may_connect(policies, source, target, port, protocol="TCP") -> bool:
    return direction_allows(
        policies, source, "egress", target, port, protocol
    ) and direction_allows(policies, target, "ingress", source, port, protocol)


def endpoint(labels: dict | None = None, namespace: str | None = NAMESPACE, **ns_labels) -> dict:
    namespace_labels = {"kubernetes.io/metadata.name": namespace, **ns_labels} if namespace else {}
    return {"labels": labels or {}, "namespace": namespace, "namespace_labels": namespace_labels}


def dagster_pods(launcher, user_values) -> dict[str, dict]:
    """Our pods with the labels the charts (selectorLabels + component) and dagster-k8s give."""
    chart = {"app.kubernetes.io/name": "dagster", "app.kubernetes.io/instance": RELEASE}
    code = {
        "app.kubernetes.io/name": "dagster-user-deployments",
        "app.kubernetes.io/instance": f"{RELEASE}-code",
        "component": "user-deployments",
        "deployment": user_values["deployments"][0]["name"],
    }
    run = DagsterRun(job_name="x", run_id=str(uuid.uuid4()))
    context = launcher.get_container_context_for_run(run)
    job = construct_dagster_k8s_job(
        job_config=context.get_k8s_job_config(image(user_values), launcher),
        args=[],
        job_name="run",
        component="run_worker",
        user_defined_k8s_config=context.run_k8s_config,
    )
    run_labels = job.spec.template.metadata.labels
    return {
        "webserver": endpoint(chart | {"component": "dagster-webserver"}),
        "read-only webserver": endpoint(chart | {"component": "dagster-webserver-read-only"}),
        "daemon": endpoint(chart | {"component": "dagster-daemon"}),
        "code server": endpoint(code),
        "run pod": endpoint(run_labels),
        "step pod": endpoint(run_labels | {"app.kubernetes.io/component": "step_worker"}),
    }


def test_network_policies_allow_only_what_each_pod_needs(network_policies, launcher, user_values):
    pods = dagster_pods(launcher, user_values)
    internet = endpoint(namespace=None)
    dns = endpoint({"k8s-app": "kube-dns"}, "kube-system")
    ingress_controller = endpoint({"app": "ingress-nginx"}, "ingress-nginx")
    other_pod = endpoint({"app": "something-else"})  # e.g. PostgreSQL in the namespace
    other_namespace = endpoint({"app": "x"}, "elsewhere")

    def allowed(source, target, port, protocol="TCP"):
        return may_connect(network_policies, source, target, port, protocol)

    kubernetes_api = endpoint(namespace=None)  # the API server, outside the pod network
    for name, pod in pods.items():
        may_start_jobs = name in ("webserver", "read-only webserver", "daemon", "run pod")
        assert allowed(pod, kubernetes_api, 6443) == may_start_jobs, name
        assert allowed(pod, dns, 53, "UDP"), name
        assert allowed(pod, internet, 443), name  # object store, webhook
        assert allowed(pod, internet, 5432), name  # PostgreSQL
        assert allowed(pod, other_pod, 5432), name
        assert not allowed(pod, internet, 22), name
        assert not allowed(pod, internet, 80), name
        assert not allowed(other_namespace, pod, 8080), name
        assert not allowed(other_pod, pod, 3030), name
        may_call_code = name in ("webserver", "read-only webserver", "daemon")
        if name != "code server":
            assert allowed(pod, pods["code server"], 3030) == may_call_code, name
    assert allowed(ingress_controller, pods["read-only webserver"], 8080)
    assert not allowed(ingress_controller, pods["webserver"], 8080)  # port-forward only
    assert not allowed(ingress_controller, pods["code server"], 3030)
    assert not allowed(pods["run pod"], pods["webserver"], 8080)
    # pods that are not Dagster's are left alone
    assert allowed(other_namespace, other_pod, 5432)


def test_network_policy_check_catches_an_open_policy(network_policies, launcher, user_values):
    pods, internet = dagster_pods(launcher, user_values), endpoint(namespace=None)
    opened = json.loads(json.dumps(network_policies))
    egress = next(p for p in opened if p["metadata"]["name"] == "tokenmill-egress")
    egress["spec"]["egress"].append({})  # allow all egress
    assert may_connect(opened, pods["run pod"], internet, 22)
    assert not may_connect(network_policies, pods["run pod"], internet, 22)
    webserver = next(p for p in opened if "read-only-webserver" in p["metadata"]["name"])
    webserver["spec"]["podSelector"] = {"matchLabels": {"app.kubernetes.io/name": "dagster"}}
    ingress_controller = endpoint({"app": "ingress-nginx"}, "ingress-nginx")
    assert may_connect(opened, ingress_controller, pods["webserver"], 8080)
