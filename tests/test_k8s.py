"""The Kubernetes deployment, checked offline: the Helm values against the official charts'
schemas, the instance the chart renders against helm/dagster-instance.yaml, and the Job and Pod
specs dagster-k8s builds for every stage, validated with kubernetes-validate."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import jsonschema
import kubernetes
import kubernetes_validate
import pytest
import yaml
from dagster import DagsterRun
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster_k8s import K8sRunLauncher
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import (
    construct_dagster_k8s_job,
    get_job_name_from_run_id,
    get_k8s_job_name,
    get_user_defined_k8s_config,
)

from data_assets.definitions import defs
from data_assets.jobs import ALL_JOBS
from data_assets.k8s import K8S_CONFIG, STAGE_RESOURCES, STAGE_TAG, quantity, run_tags

PROJECT_DIR = Path(__file__).resolve().parents[1]
HELM = PROJECT_DIR / "helm"
SCHEMAS = Path(__file__).resolve().parent / "helm_schema"
KUBERNETES_VERSION = "1.33.0"
RELEASE = NAMESPACE = "tokenmill"
CHART_DAGSTER_HOME = "/opt/dagster/dagster_home"  # global.dagsterHome in the chart's values.yaml


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

    daemon = values["dagsterDaemon"]
    queued = daemon["runCoordinator"]["config"]["queuedRunCoordinator"]
    return {
        "schedule_storage": storage("dagster_postgres.schedule_storage", "PostgresScheduleStorage"),
        "run_launcher": {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": launcher},
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


STORAGES = ("run_storage", "event_log_storage", "schedule_storage")


def test_chart_renders_the_production_instance(values):
    rendered, production = render_instance(values), load(HELM / "dagster-instance.yaml")
    for section in (
        "run_launcher",
        "run_coordinator",
        "run_retries",
        "run_monitoring",
        "telemetry",
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
    launcher = validated["run_launcher"]["config"]
    checked = process_config(K8sRunLauncher.config_type(), launcher)
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
    """What includeConfigInLaunchedRuns hands every run: the user deployment's env and secrets."""
    deployment = user_values["deployments"][0]
    return K8sContainerContext(
        env_vars=[f"{name}={value}" for name, value in deployment["env"].items()],
        env_secrets=[secret["name"] for secret in deployment["envSecrets"]],
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


def check_pod(pod: dict, expected_resources: dict) -> None:
    (container,) = pod["spec"]["containers"]
    assert container["resources"] == expected_resources
    assert {"secretRef": {"name": "tokenmill-s3"}} in container["envFrom"]
    env = {item["name"]: item for item in container["env"]}
    assert env["DAGSTER_PG_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "tokenmill-postgresql",
        "key": "postgresql-password",
    }
    assert env["TOKENMILL_LAKE_URL"]["value"].startswith("s3://")
    assert pod["spec"]["serviceAccountName"] == "tokenmill-dagster"


@pytest.mark.parametrize("job", ALL_JOBS, ids=lambda job: job.name)
def test_run_pod_per_job_is_valid_and_sized_for_its_stages(job, launcher, user_values):
    stages = job.selection.resolve(defs.resolve_asset_graph())
    stage_names = [key.path[-1] for key in stages]
    tags = defs.resolve_job_def(job.name).tags
    assert json.loads(tags[K8S_CONFIG]) == run_tags(*stage_names)[K8S_CONFIG]
    assert tags[STAGE_TAG] == run_tags(*stage_names)[STAGE_TAG]
    run = DagsterRun(job_name=job.name, run_id=str(uuid.uuid4()), tags=tags)
    # K8sRunLauncher._launch_k8s_job_with_args, without the API call.
    context = launcher.get_container_context_for_run(run).merge(code_location_context(user_values))
    manifest, pod = validated(
        construct_dagster_k8s_job(
            job_config=context.get_k8s_job_config(
                job_image=image(user_values), run_launcher=launcher
            ),
            args=["dagster", "api", "execute_run", "{}"],
            job_name=get_job_name_from_run_id(run.run_id),
            component="run_worker",
            user_defined_k8s_config=context.run_k8s_config,
            labels={"dagster/job": job.name, "dagster/run-id": run.run_id},
            env_vars=[{"name": "DAGSTER_RUN_JOB_NAME", "value": job.name}],
        )
    )
    resources = pod["spec"]["containers"][0]["resources"]
    for stage in stage_names:  # the run pod fits every stage it runs
        for kind in ("requests", "limits"):
            for name, amount in STAGE_RESOURCES[stage][kind].items():
                assert quantity(resources[kind][name]) >= quantity(amount)
    check_pod(pod, resources)
    assert manifest["spec"]["ttlSecondsAfterFinished"] == 86400


@pytest.mark.parametrize("stage", sorted(STAGE_RESOURCES))
def test_step_pod_per_stage_is_valid_and_sized_by_its_op_tags(stage, launcher, user_values):
    tags = defs.resolve_assets_def(stage).op.tags
    run = DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()))
    # K8sStepHandler._get_container_context and launch_step, without the API call.
    context = (
        K8sContainerContext.create_for_run(run, launcher, include_run_tags=False)
        .merge(code_location_context(user_values))
        .merge(K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(tags)))
    )
    _, pod = validated(
        construct_dagster_k8s_job(
            job_config=context.get_k8s_job_config(image(user_values), launcher),
            args=["dagster", "api", "execute_step"],
            job_name=f"dagster-step-{get_k8s_job_name(run.run_id, stage)}",
            component="step_worker",
            user_defined_k8s_config=context.run_k8s_config,
            labels={"dagster/op": stage, "dagster/run-id": run.run_id},
        )
    )
    check_pod(pod, STAGE_RESOURCES[stage])


def test_heavy_stages_get_the_resources_they_need():
    cpu = {stage: quantity(r["requests"]["cpu"]) for stage, r in STAGE_RESOURCES.items()}
    memory = {stage: quantity(r["requests"]["memory"]) for stage, r in STAGE_RESOURCES.items()}
    assert max(cpu, key=cpu.get) in ("cleaned", "tokenized_shards")
    assert cpu["cleaned"] == cpu["tokenized_shards"] == max(cpu.values())
    assert max(memory, key=memory.get) == "dedup_clusters"


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
