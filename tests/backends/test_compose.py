"""docker-compose.yml is valid, and runs the same configs and versions the native tests run.

No container engine runs here, so compose is checked statically: against the compose
specification, and against the files and builds the tracing_stack fixture uses.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.backends.fixtures import (
    BACKENDS_SCRIPT,
    COLLECTOR_CONFIG,
    CONFIG_DIR,
    JAEGER_CONFIG,
    REPO,
    Backends,
)

COMPOSE_FILE = REPO / "docker-compose.yml"
BUILDER_MANIFEST = CONFIG_DIR / "builder-config.yaml"
JAEGER_MODULE = REPO / "backends" / "jaeger" / "go.mod"
COMPOSE_SCHEMA = ("--builtin-schema", "vendor.compose-spec")


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _compose_services() -> dict[str, Any]:
    services: dict[str, Any] = _load(COMPOSE_FILE)["services"]
    return services


def _validate_compose(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", *COMPOSE_SCHEMA, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_compose_file_follows_the_compose_specification() -> None:
    result = _validate_compose(COMPOSE_FILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_validation_rejects_a_misspelt_service_key(tmp_path: Path) -> None:
    broken = _load(COMPOSE_FILE)
    broken["services"]["jaeger"]["portz"] = broken["services"]["jaeger"].pop("ports")
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    assert _validate_compose(path).returncode != 0


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host file, for the bind mounts of a service."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        mounts[target] = (REPO / source).resolve()
    return mounts


def test_every_mounted_config_file_exists() -> None:
    for name, service in _compose_services().items():
        for target, source in _mounts(service).items():
            assert source.is_file(), f"{name} mounts missing {source} at {target}"


@pytest.mark.parametrize(
    ("service", "native_config"),
    [("otel-collector", COLLECTOR_CONFIG), ("jaeger", JAEGER_CONFIG)],
)
def test_compose_runs_the_config_the_native_tests_run(service: str, native_config: Path) -> None:
    definition = _compose_services()[service]
    (config_flag,) = [arg for arg in definition["command"] if arg.startswith("--config=")]
    container_path = config_flag.removeprefix("--config=")
    assert _mounts(definition)[container_path] == native_config.resolve()


def _image_tag(service: str) -> str:
    return str(_compose_services()[service]["image"]).rpartition(":")[2]


def test_collector_image_matches_the_native_build() -> None:
    manifest = _load(BUILDER_MANIFEST)
    assert _image_tag("otel-collector") == manifest["dist"]["version"]
    contrib_versions = {
        entry["gomod"].split()[1]
        for kind in ("extensions", "receivers", "processors", "exporters", "connectors")
        for entry in manifest[kind]
        if "opentelemetry-collector-contrib" in entry["gomod"]
    }
    assert contrib_versions == {f"v{manifest['dist']['version']}"}


def test_jaeger_image_matches_the_native_build() -> None:
    # Jaeger releases v2.x binaries from v1.(x+63) of its Go module (v2.13.0 <- v1.76.0).
    module_version = re.search(
        r"github\.com/jaegertracing/jaeger (v1\.(\d+)\.(\d+))", JAEGER_MODULE.read_text()
    )
    assert module_version is not None
    v2_version = f"2.{int(module_version[2]) - 63}.{module_version[3]}"
    assert _image_tag("jaeger") == v2_version
    assert f"latestVersion=v{v2_version}" in BACKENDS_SCRIPT.read_text()


def _component_modules(config: dict[str, Any]) -> set[str]:
    """The Go module name each component in use would have (otlp receiver -> otlpreceiver)."""
    service = config["service"]
    used = {("extension", name) for name in service.get("extensions", [])}
    for pipeline in service["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            used |= {(kind[:-1], name) for name in pipeline.get(kind, [])}
    connectors = set(config.get("connectors", {}))
    modules = set()
    for kind, name in used:
        component_type = name.split("/")[0]
        kind = "connector" if component_type in connectors else kind
        modules.add(component_type.replace("_", "") + kind)
    return modules


def test_native_collector_build_has_exactly_the_components_the_config_uses() -> None:
    manifest = _load(BUILDER_MANIFEST)
    built = {
        entry["gomod"].split()[0].rsplit("/", 1)[1]
        for kind in ("extensions", "receivers", "processors", "exporters", "connectors")
        for entry in manifest[kind]
    }
    assert built == _component_modules(_load(COLLECTOR_CONFIG))


@pytest.mark.integration
@pytest.mark.parametrize(
    ("binary", "config"), [("otelcol", COLLECTOR_CONFIG), ("jaeger", JAEGER_CONFIG)]
)
def test_config_is_valid_with_the_compose_defaults(
    backends: Backends, binary: str, config: Path
) -> None:
    # No endpoint variable set: the values compose runs with.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    result = subprocess.run(
        [str(getattr(backends, binary)), "validate", f"--config={config}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
