"""docker-compose.yml is valid, and runs the same configs and versions the native tests run.

No container engine runs here, so compose is checked statically: against the compose
specification, and against the files and builds the tracing_stack fixture uses. The same goes
for docker-compose.persistent.yml, the override that gives Jaeger its Badger storage.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.backends.fixtures import (
    BACKENDS_SCRIPT,
    COLLECTOR_CONFIG,
    CONFIG_DIR,
    JAEGER_BADGER_CONFIG,
    JAEGER_CONFIG,
    REPO,
    Backends,
)

COMPOSE_FILE = REPO / "docker-compose.yml"
PERSISTENT_OVERRIDE = REPO / "docker-compose.persistent.yml"
BUILDER_MANIFEST = CONFIG_DIR / "builder-config.yaml"
COLLECTOR_CONFIGS = (
    COLLECTOR_CONFIG,
    CONFIG_DIR / "otel-gateway.yaml",
    CONFIG_DIR / "otel-sampler.yaml",
)
JAEGER_MODULE = REPO / "backends" / "jaeger" / "go.mod"
COMPOSE_SCHEMA = ("--builtin-schema", "vendor.compose-spec")


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _compose_services(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    services: dict[str, Any] = _load(path)["services"]
    return services


def _validate_compose(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", *COMPOSE_SCHEMA, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("path", [COMPOSE_FILE, PERSISTENT_OVERRIDE], ids=lambda path: path.name)
def test_compose_file_follows_the_compose_specification(path: Path) -> None:
    result = _validate_compose(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_validation_rejects_a_misspelt_service_key(tmp_path: Path) -> None:
    broken = _load(COMPOSE_FILE)
    broken["services"]["jaeger"]["portz"] = broken["services"]["jaeger"].pop("ports")
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    assert _validate_compose(path).returncode != 0


def _is_bind_mount(source: str) -> bool:
    return source.startswith((".", "/"))


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host file, for the bind mounts of a service."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if _is_bind_mount(source):
            mounts[target] = (REPO / source).resolve()
    return mounts


def _named_volumes(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> volume name, for the named volumes of a service."""
    volumes = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if not _is_bind_mount(source):
            volumes[target] = source
    return volumes


@pytest.mark.parametrize("path", [COMPOSE_FILE, PERSISTENT_OVERRIDE], ids=lambda path: path.name)
def test_every_mounted_config_file_exists(path: Path) -> None:
    for name, service in _compose_services(path).items():
        for target, source in _mounts(service).items():
            assert source.is_file(), f"{name} mounts missing {source} at {target}"


@pytest.mark.parametrize("path", [COMPOSE_FILE, PERSISTENT_OVERRIDE], ids=lambda path: path.name)
def test_every_named_volume_is_declared_and_handed_to_the_services_user(path: Path) -> None:
    # The images run as user 10001 and a new volume belongs to root: volume-permissions must
    # chown every data volume before the service using it starts.
    services = _compose_services(path)
    declared = set(_load(path).get("volumes") or {})
    handed_over = set(_named_volumes(services["volume-permissions"]).values())
    for name, service in services.items():
        if name == "volume-permissions":
            continue
        for target, volume in _named_volumes(service).items():
            assert volume in declared, f"{name} mounts {volume} at {target}, not declared"
            assert volume in handed_over, f"volume-permissions does not chown {volume}"
            dependency = service.get("depends_on", {}).get("volume-permissions", {})
            assert dependency.get("condition") == "service_completed_successfully", name


def _env_default(config: Path, variable: str) -> str:
    """The default a config file gives ``${env:VARIABLE:-default}``; one default per variable."""
    defaults = set(re.findall(rf"\$\{{env:{variable}:-([^}}]*)\}}", config.read_text()))
    assert len(defaults) == 1, f"{config.name}: {variable} defaults {defaults}"
    return defaults.pop()


@pytest.mark.parametrize(
    ("path", "service", "variable", "config"),
    [
        (COMPOSE_FILE, "otel-collector", "OTELCOL_STORAGE_DIR", COLLECTOR_CONFIG),
        (PERSISTENT_OVERRIDE, "jaeger", "JAEGER_BADGER_DIR", JAEGER_BADGER_CONFIG),
    ],
)
def test_data_directory_is_a_volume_at_the_configs_default(
    path: Path, service: str, variable: str, config: Path
) -> None:
    definition = _compose_services(path)[service]
    directory = definition["environment"][variable]
    assert directory == _env_default(config, variable)
    assert directory in _named_volumes(definition)


def test_persistent_override_runs_the_badger_config() -> None:
    definition = _compose_services(PERSISTENT_OVERRIDE)["jaeger"]
    (config_flag,) = [arg for arg in definition["command"] if arg.startswith("--config=")]
    assert _mounts(definition)[config_flag.removeprefix("--config=")] == (
        JAEGER_BADGER_CONFIG.resolve()
    )


def test_badger_config_is_the_jaeger_config_but_for_the_storage() -> None:
    memory, badger = _load(JAEGER_CONFIG), _load(JAEGER_BADGER_CONFIG)
    assert set(memory["extensions"]["jaeger_storage"]["backends"]["traces_store"]) == {"memory"}
    badger_store = badger["extensions"]["jaeger_storage"]["backends"]["traces_store"]
    assert set(badger_store) == {"badger"}
    assert badger_store["badger"]["ephemeral"] is False
    for config in (memory, badger):
        del config["extensions"]["jaeger_storage"]["backends"]
    assert badger == memory


def test_compose_keeps_the_images_built_in_ui() -> None:
    # The image has the UI inside: an assets path would replace it with a directory it lacks.
    for path in (COMPOSE_FILE, PERSISTENT_OVERRIDE):
        assert "JAEGER_UI_ASSETS" not in _compose_services(path)["jaeger"].get("environment", {})
    assert _env_default(JAEGER_CONFIG, "JAEGER_UI_ASSETS") == ""


@pytest.mark.parametrize("config", [JAEGER_CONFIG, JAEGER_BADGER_CONFIG], ids=lambda p: p.name)
def test_monitor_tab_reads_the_compose_prometheus_that_scrapes_the_collector(config: Path) -> None:
    endpoint = urlsplit(_env_default(config, "JAEGER_PROMETHEUS_ENDPOINT"))
    services = _compose_services()
    assert endpoint.hostname in services
    prometheus = services[str(endpoint.hostname)]
    assert any(str(port).endswith(f":{endpoint.port}") for port in prometheus["ports"])
    (config_flag,) = [arg for arg in prometheus["command"] if arg.startswith("--config.file=")]
    scrape = _load(_mounts(prometheus)[config_flag.removeprefix("--config.file=")])
    targets = scrape["scrape_configs"][0]["static_configs"][0]["targets"]
    collector_port = _env_default(COLLECTOR_CONFIG, "OTELCOL_PROMETHEUS_ENDPOINT").rpartition(":")[
        2
    ]
    assert targets == [f"otel-collector:{collector_port}"]


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


def _components_in_use(config: dict[str, Any]) -> set[tuple[str, str]]:
    """(kind, type without underscores) of each component in use: ("receiver", "otlp")."""
    service = config["service"]
    used = {("extension", name) for name in service.get("extensions", [])}
    for pipeline in service["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            used |= {(kind[:-1], name) for name in pipeline.get(kind, [])}
    connectors = set(config.get("connectors", {}))
    components = set()
    for kind, name in used:
        component_type = name.split("/")[0]
        kind = "connector" if component_type in connectors else kind
        components.add((kind, component_type.replace("_", "")))
    return components


def test_native_collector_build_has_exactly_the_components_the_config_uses() -> None:
    # A module is named after its component, with or without the kind after it:
    # .../receiver/otlpreceiver, .../extension/storage/filestorage.
    manifest = _load(BUILDER_MANIFEST)
    built = {
        (kind[:-1], entry["gomod"].split()[0].rsplit("/", 1)[1].removesuffix(kind[:-1]))
        for kind in ("extensions", "receivers", "processors", "exporters", "connectors")
        for entry in manifest[kind]
    }
    # one binary runs the single collector and both tiers of the scalable layout
    in_use = set().union(*(_component_set(config) for config in COLLECTOR_CONFIGS))
    assert built == in_use


def _component_set(config: Path) -> set[tuple[str, str]]:
    return _components_in_use(_load(config))


@pytest.mark.integration
@pytest.mark.parametrize(
    ("binary", "config"),
    [
        *(("otelcol", config) for config in COLLECTOR_CONFIGS),
        ("jaeger", JAEGER_CONFIG),
        ("jaeger", JAEGER_BADGER_CONFIG),
    ],
    ids=lambda value: value.name if isinstance(value, Path) else value,
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
