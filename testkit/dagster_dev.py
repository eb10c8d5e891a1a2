"""`dagster dev` (webserver + daemon) on loopback, on a temporary instance and lake, for the
tests that drive the pipeline the way its users do: GraphQL, the `dagster` CLI, a browser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.instance.ref import InstanceRef

from testkit.servers import free_port, stop

PROJECT_DIR = Path(__file__).resolve().parents[1]
DAGSTER = Path(sys.executable).parent / "dagster"
WORKSPACE_QUERY = """
{ workspaceOrError { ... on Workspace { locationEntries {
    name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""
DAEMONS_QUERY = "{ instance { daemonHealth { allDaemonStatuses { daemonType healthy } } } }"
INSTIGATORS_QUERY = """
{ repositoriesOrError { ... on RepositoryConnection { nodes {
    sensors { name sensorState { id status } }
    schedules { name scheduleState { id status } } } } } }
"""
STOP_SENSOR = """
mutation($id: String) { stopSensor(id: $id) { __typename ... on PythonError { message } } }
"""
STOP_SCHEDULE = """
mutation($id: String) { stopRunningSchedule(id: $id) { __typename ... on PythonError { message } } }
"""
TERMINATE_RUN = """
mutation($runId: String!) { terminateRun(runId: $runId) { __typename } }
"""
UNFINISHED = [DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]
BACKFILL_UNDER_WAY = {
    BulkActionStatus.REQUESTED,
    BulkActionStatus.CANCELING,
    BulkActionStatus.FAILING,
}
LAUNCH_BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on PartitionKeysNotFoundError { message }
  }
}
"""
KEPT = {"dead_runs"}  # sensors that launch nothing, kept by `stop_automation`
NEEDED_DAEMONS = {"BACKFILL", "QUEUED_RUN_COORDINATOR"}


def project_instance_env(root: Path) -> dict[str, str]:
    """DAGSTER_HOME (with the project's dagster.yaml) and the lake under `root`."""
    home = root / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.symlink_to(PROJECT_DIR / "dagster.yaml")
    return {"DAGSTER_HOME": str(home), "TOKENMILL_LAKE_URL": str(root / "lake")}


def instance_at(home: Path) -> DagsterInstance:
    """The instance of a DAGSTER_HOME, whether or not a server serves it."""
    return DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))


@dataclass
class DagsterDev:
    url: str
    env: dict[str, str]
    process: subprocess.Popen
    log: Path

    @property
    def home(self) -> Path:
        return Path(self.env["DAGSTER_HOME"])

    def instance(self) -> DagsterInstance:
        """Another handle on the instance `dagster dev` serves (same SQLite storage)."""
        return instance_at(self.home)

    def graphql(self, query: str, variables: dict | None = None, timeout: float = 60) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            raise RuntimeError(f"GraphQL errors: {answer['errors']}")
        return answer["data"]

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """`dagster <args>` from the project folder on this instance and lake; must succeed."""
        done = subprocess.run(
            [str(DAGSTER), *args],
            cwd=PROJECT_DIR,
            env=os.environ | self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode:
            raise AssertionError(
                f"dagster {' '.join(args)} exited with {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def stop_automation(self) -> None:
        """Stop every sensor and schedule that launches runs (the `dead_runs` sensor, which
        launches none, keeps watching) and cancel the runs they launched before that (the
        automation sensor's first tick races the webserver), so only a test's runs happen.
        Stopped until two looks find nothing running: a tick that began before its sensor's
        stop may write the sensor's state back as declared in code (running) when it ends."""
        still_stopped = 0
        for _ in range(30):
            stopped = self._stop_running_instigators()
            time.sleep(1)
            self.wait_for_ticks_under_way()  # a tick under way when its sensor stopped ends
            still_stopped = 0 if stopped else still_stopped + 1
            if still_stopped == 2:
                break
        else:
            raise TimeoutError("sensors or schedules kept running after 30 stops")
        with self.instance() as instance:
            unfinished = instance.get_runs(RunsFilter(statuses=UNFINISHED))
        for run in unfinished:
            self.graphql(TERMINATE_RUN, {"runId": run.run_id})

    def _stop_running_instigators(self) -> bool:
        """Stop what runs; whether anything did."""
        stopped = False
        for repository in self.graphql(INSTIGATORS_QUERY)["repositoriesOrError"]["nodes"]:
            for sensor in repository["sensors"]:
                if sensor["sensorState"]["status"] == "RUNNING" and sensor["name"] not in KEPT:
                    answer = self.graphql(STOP_SENSOR, {"id": sensor["sensorState"]["id"]})
                    assert answer["stopSensor"]["__typename"] != "PythonError", answer
                    stopped = True
            for schedule in repository["schedules"]:
                if schedule["scheduleState"]["status"] == "RUNNING":
                    answer = self.graphql(STOP_SCHEDULE, {"id": schedule["scheduleState"]["id"]})
                    assert answer["stopRunningSchedule"]["__typename"] != "PythonError", answer
                    stopped = True
        return stopped

    def wait_for_ticks_under_way(self, timeout: float = 120) -> None:
        """Until no sensor tick is under way (the code server evaluates the automation sensors
        too, so a landing tick that started before its sensor stopped may end seconds later)."""
        from dagster._core.scheduler.instigation import InstigatorType, TickStatus

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.instance() as instance:
                states = instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
                under_way = [
                    state.name
                    for state in states
                    for tick in instance.get_ticks(
                        state.instigator_origin_id, state.selector_id, limit=1
                    )
                    if tick.status == TickStatus.STARTED
                ]
            if not under_way:
                return
            time.sleep(1)
        raise TimeoutError(f"sensor ticks still under way after {timeout} s: {under_way}")

    def launch_backfill(self, params: dict) -> str:
        """Launch a backfill as the UI does (LaunchBackfillParams); returns its id."""
        launched = self.graphql(LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
        if launched["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(f"backfill not launched: {launched}")
        return launched["backfillId"]

    def wait_for_backfill(self, backfill_id: str, timeout: float) -> PartitionBackfill:
        """The backfill once the daemon has finished it (successfully or not)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.instance() as instance:
                backfill = instance.get_backfill(backfill_id)
            if backfill and backfill.status not in BACKFILL_UNDER_WAY:
                return backfill
            if time.monotonic() > deadline:
                raise TimeoutError(f"backfill {backfill_id} not done in {timeout} s: {backfill}")
            time.sleep(1)

    def wait_for_runs(self, tags: dict[str, str], count: int, timeout: float) -> list[DagsterRun]:
        """The runs with these tags, once there are `count` of them and all have finished."""
        deadline = time.monotonic() + timeout
        while True:
            with self.instance() as instance:
                runs = instance.get_runs(RunsFilter(tags=tags))
            if len(runs) >= count and all(run.is_finished for run in runs):
                return runs
            if time.monotonic() > deadline:
                states = [(run.job_name, run.status.value) for run in runs]
                raise TimeoutError(f"runs tagged {tags} not done in {timeout} s: {states}")
            time.sleep(1)

    def wait_until_ready(self, timeout: float) -> None:
        """Webserver answering, code location loaded, backfill and run-queue daemons alive."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"dagster dev exited with {self.process.returncode}: "
                    f"{self.log.read_text()[-3000:]}"
                )
            if self._ready():
                return
            time.sleep(0.5)
        raise RuntimeError(
            f"dagster dev at {self.url} not ready in {timeout} s: {self.log.read_text()[-3000:]}"
        )

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/server_info", timeout=5) as response:
                if response.status != 200:
                    return False
            locations = self.graphql(WORKSPACE_QUERY)["workspaceOrError"]["locationEntries"]
        except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError):
            return False
        for location in locations:
            loaded = location["locationOrLoadError"] or {}
            if loaded.get("__typename") == "PythonError":
                raise RuntimeError(f"code location {location['name']}: {loaded['message']}")
        if not locations or any(entry["loadStatus"] != "LOADED" for entry in locations):
            return False
        statuses = self.graphql(DAEMONS_QUERY)["instance"]["daemonHealth"]["allDaemonStatuses"]
        healthy = {status["daemonType"] for status in statuses if status["healthy"]}
        return NEEDED_DAEMONS.issubset(healthy)


def start_dagster_dev(root: Path, timeout: float = 300, **extra_env: str) -> DagsterDev:
    """`dagster dev -w workspace.yaml` on 127.0.0.1, in its own process group (stop it with
    `stop_dagster_dev`: started in the background it only stops by its group id)."""
    env = project_instance_env(root) | extra_env
    port = free_port()
    log = root / "dagster_dev.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(DAGSTER), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=PROJECT_DIR,
            env=os.environ | env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    dev = DagsterDev(f"http://127.0.0.1:{port}", env, process, log)
    try:
        dev.wait_until_ready(timeout)
    except BaseException:
        stop_dagster_dev(dev)
        raise
    return dev


def stop_dagster_dev(dev: DagsterDev) -> None:
    stop(dev.process)
