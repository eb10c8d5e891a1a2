"""The architecture as installed: one top-level name in site-packages, the Dagster layer inside
the package, and the import contracts of pyproject.toml (layers, a Dagster-free core, stages
independent of each other, no cycles) kept by the code a wheel ships."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The project's wheel, unpacked as an installer would lay it out."""
    wheels = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        ["uv", "build", "--wheel", "--quiet", "--out-dir", str(wheels), str(PROJECT)],
        check=True,
        cwd=PROJECT,
    )
    site = tmp_path_factory.mktemp("site-packages")
    (wheel,) = wheels.glob("tokenmill-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    shutil.copy(PROJECT / "pyproject.toml", site)  # the contracts
    return site


def run_in(site: Path, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        cwd=site,
        env=os.environ | {"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )


def test_the_wheel_installs_one_top_level_name(installed):
    names = {path.name for path in installed.iterdir() if path.name != "pyproject.toml"}
    assert {n for n in names if not n.endswith(".dist-info")} == {"tokenmill"}
    for layer in ("resources", "data_assets", "sensors"):
        assert (installed / "tokenmill" / layer / "__init__.py").is_file()
    assert not list(installed.rglob("__pycache__"))


def test_the_installed_package_finds_its_dagster_layer_inside(installed):
    probe = run_in(
        installed,
        sys.executable,
        "-c",
        "import tokenmill.definitions, tokenmill.data_assets as d, tokenmill.sensors as s;"
        "print(d.__file__); print(s.__file__)",
    )
    assert probe.returncode == 0, probe.stderr
    for line in probe.stdout.split():
        assert Path(line).is_relative_to(installed / "tokenmill")


def test_the_import_contracts_hold(installed):
    result = run_in(installed, str(LINT_IMPORTS), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.lower().replace("0 broken", "")


def test_the_contracts_refuse_a_lower_layer_importing_a_higher_one(installed, tmp_path):
    broken = tmp_path / "site"
    shutil.copytree(installed, broken)
    (broken / "tokenmill" / "storage" / "upward.py").write_text("import tokenmill.stages.cleaned\n")
    (broken / "tokenmill" / "stages" / "sideways.py").write_text(
        "import tokenmill.stages.release\n"
    )
    result = run_in(broken, str(LINT_IMPORTS), "--no-cache")
    assert result.returncode != 0
    assert "tokenmill.storage.upward -> tokenmill.stages.cleaned" in result.stdout
    assert "tokenmill.stages.sideways -> tokenmill.stages.release" in result.stdout


def test_a_checkout_imports_the_dagster_layer_from_its_top_level_folders():
    import tokenmill.data_assets
    import tokenmill.resources
    import tokenmill.sensors

    for package in (tokenmill.resources, tokenmill.data_assets, tokenmill.sensors):
        assert Path(package.__file__).parent.parent == PROJECT
    assert "data_assets" not in sys.modules  # no second, top-level copy


def test_no_module_is_named_after_a_standard_library_module(installed):
    shadowing = [
        str(path.relative_to(installed))
        for path in (installed / "tokenmill").rglob("*")
        if (path.suffix == ".py" or (path / "__init__.py").is_file())
        and path.stem in sys.stdlib_module_names
    ]
    assert shadowing == []
