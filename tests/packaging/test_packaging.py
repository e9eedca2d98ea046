"""llmtrace installed the way users install it.

The wheels and the sdist come from the project's one build (scripts/build_dist.sh, the build
scripts/setup.sh uses too): manylinux_2_17 wheels for x86_64 and aarch64, checked with auditwheel
and by their reader's ELF header. This machine's wheel and the sdist each go into a fresh
virtualenv with no extras and no Rust on PATH, and the commands run from there: the wheel brings
the native reader, the sdist installs without it and says so. The openai extra alone traces a call; scripts/test_min_deps.sh runs the lowest
declared versions. pip's cache serves the dependencies, cargo's cached target directory the
build, so a warm run takes a minute or two.

Each fresh install is kept in the cache ($LLMTRACE_CACHE/venvs/packaging/), keyed by what was
installed: the requirement, the contents of the wheel or sdist (file by file, so a rebuild of the
same tree is the same key), Python's and pip's versions. A run whose wheel and sdist are those of
the previous run finds the three installs made by it (each a fresh install of exactly these
files) instead of making them again, about a minute on this machine; any change to llmtrace, its
metadata or its requirements makes new ones. ``LLMTRACE_FRESH_INSTALLS=1`` always makes new ones.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import pytest

import llmtrace
from tests.build_cache import CACHE
from tests.servers.model_server import ModelServer
from tests.subprocesses import clean_environment

pytestmark = [pytest.mark.integration, pytest.mark.computes]

REPO = Path(__file__).resolve().parents[2]
DISTRIBUTION = "llmtrace-otel"
# The architectures scripts/build_dist.sh makes wheels for, and their ELF machine numbers.
ELF_MACHINES = {"x86_64": 62, "aarch64": 183}
# Packages of the extras: a plain install has none of them. (requests is not here: the OTLP HTTP
# exporter depends on it.)
OPTIONAL = {
    "openai",
    "anthropic",
    "httpx2",
    "chromadb",
    "qdrant-client",
    "faiss-cpu",
    "langchain-core",
    "litellm",
    "llama-index-core",
    "numpy",
    "llama-cpp-python",
    "fastapi",
}
# A plain install (dependencies of the OpenTelemetry SDK, its OTLP exporters with gRPC, rich,
# httpx, orjson) measured 82 MB with pip itself; a dependency that pulls in something big fails.
PLAIN_INSTALL_MAX_BYTES = 150 * 1024 * 1024

APP = """\
import time
import llmtrace

llmtrace.init(service_name="packaged-app")


@llmtrace.retrieval
def search(question):
    time.sleep(0.004)
    return [question]


@llmtrace.workflow
def answer(question):
    search(question)
    time.sleep(0.002)
    return question


for i in range(20):
    answer(f"question {i}")
"""

OPENAI_APP = """\
import sys
import llmtrace
import openai

llmtrace.init(service_name="openai-app")
client = openai.OpenAI(base_url=sys.argv[1], api_key="sk-test", max_retries=0)
stream = client.chat.completions.create(
    model="gpt-test", messages=[{"role": "user", "content": "Say hello"}], stream=True
)
print("".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
"""


@dataclass(frozen=True)
class Dist:
    wheel: Path  # this machine's
    sdist: Path
    wheels: dict[str, Path]  # by architecture


INSTALLS_CACHE = CACHE / "venvs" / "packaging"
# Installs of other keys kept per name (the checkout's tree changes between runs; others' runs
# may still be using an older one)
KEPT_PER_NAME = 3


@dataclass(frozen=True)
class Install:
    """A fresh virtualenv with one thing pip-installed into it, and what that took."""

    venv: Path
    seconds: float
    added_bytes: int

    def run(self, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        program = str(self.venv / "bin" / argv[0])
        return subprocess.run(
            [program, *argv[1:]],
            cwd=cwd,
            env=no_rust_environment(),
            capture_output=True,
            text=True,
            timeout=300,
        )

    def installed(self) -> set[str]:
        listing = self.run("python", "-m", "pip", "list", "--format", "json", cwd=self.venv)
        return {package["name"].lower() for package in json.loads(listing.stdout)}


def no_rust_environment() -> dict[str, str]:
    """The test's environment without OTEL_/LLMTRACE_ settings, virtualenv or build variables, and
    with no directory on PATH that holds cargo or rustc: a user's machine without Rust."""
    path = [
        folder
        for folder in os.environ["PATH"].split(os.pathsep)
        if folder and not any((Path(folder) / tool).exists() for tool in ("cargo", "rustc"))
    ]
    env = clean_environment(PATH=os.pathsep.join(path))
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "CARGO_TARGET_DIR", "PYO3_PYTHON"):
        env.pop(name, None)
    assert shutil.which("cargo", path=env["PATH"]) is None
    assert shutil.which("rustc", path=env["PATH"]) is None
    return env


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


def _contents_digest(archive: Path) -> str:
    """The digest of an archive's member names and bytes (not their times): a rebuild of the
    same tree gives the same digest."""
    digest = hashlib.sha256()
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel:
            for name in sorted(wheel.namelist()):
                digest.update(name.encode() + b"\0" + wheel.read(name) + b"\0")
    else:
        with tarfile.open(archive) as sdist:
            members = sorted((m for m in sdist.getmembers() if m.isfile()), key=lambda m: m.name)
            for member in members:
                content = sdist.extractfile(member)
                assert content is not None
                digest.update(member.name.encode() + b"\0" + content.read() + b"\0")
    return digest.hexdigest()


def _install_key(requirement: str, archive: Path) -> str:
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    parts = [requirement.replace(archive.as_uri(), "").replace(str(archive), ""), archive.name]
    parts += [_contents_digest(archive), sys.version, pip]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def cached_install(name: str, requirement: str, archive: Path) -> Install:
    """``fresh_install`` of ``requirement`` (which installs ``archive``), made once per key
    in the cache; a made install is checked again with ``pip check``."""
    INSTALLS_CACHE.mkdir(parents=True, exist_ok=True)
    key = _install_key(requirement, archive)
    folder = INSTALLS_CACHE / f"{name}-{key}"
    record = folder / "llmtrace-install.json"
    with (INSTALLS_CACHE / f"{name}-{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if record.exists() and not os.environ.get("LLMTRACE_FRESH_INSTALLS"):
            made = json.loads(record.read_text())
            install = Install(folder, made["seconds"], made["added_bytes"])
            check = install.run("python", "-m", "pip", "check", cwd=folder)
            assert check.returncode == 0, check.stdout
            return install
        shutil.rmtree(folder, ignore_errors=True)
        install = fresh_install(folder, requirement)
        made = {"seconds": install.seconds, "added_bytes": install.added_bytes}
        record.write_text(json.dumps(made))
    others = sorted(
        (f for f in INSTALLS_CACHE.glob(f"{name}-*") if f.is_dir() and f != folder),
        key=lambda f: f.stat().st_mtime,
    )
    for old in others[: max(0, len(others) - (KEPT_PER_NAME - 1))]:
        shutil.rmtree(old, ignore_errors=True)
        old.with_suffix(".lock").unlink(missing_ok=True)
    return install


def fresh_install(folder: Path, requirement: str) -> Install:
    """``python -m venv`` then ``pip install requirement``, as a user would, without Rust."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=120)
    before = _size(folder)
    started = time.monotonic()
    pip = [str(folder / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    result = subprocess.run(
        [*pip, "install", "--progress-bar", "off", requirement],
        env=no_rust_environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    install = Install(folder, time.monotonic() - started, _size(folder) - before)
    check = install.run("python", "-m", "pip", "check", cwd=folder)
    assert check.returncode == 0, check.stdout
    return install


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        ["bash", str(REPO / "scripts" / "build_dist.sh"), str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    wheels = {}
    for arch in ELF_MACHINES:
        (wheels[arch],) = out.glob(f"llmtrace_otel-*_{arch}.whl")
    assert len(list(out.glob("*.whl"))) == len(ELF_MACHINES)
    (sdist,) = out.glob("llmtrace_otel-*.tar.gz")
    return Dist(wheels[platform.machine()], sdist, wheels)


@pytest.fixture(scope="module")
def installs(dist: Dist) -> dict[str, Install]:
    """The three fresh installs, made side by side (each mostly waits on pip) or found in the
    cache: the wheel with no extra, the sdist with no extra, the wheel with the openai extra."""
    requirements = {
        "wheel": (str(dist.wheel), dist.wheel),
        "sdist": (str(dist.sdist), dist.sdist),
        "openai": (f"{DISTRIBUTION}[openai] @ {dist.wheel.as_uri()}", dist.wheel),
    }
    with ThreadPoolExecutor(len(requirements)) as pool:
        futures = {
            name: pool.submit(cached_install, name, requirement, archive)
            for name, (requirement, archive) in requirements.items()
        }
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="module")
def plain_wheel(installs: dict[str, Install]) -> Install:
    return installs["wheel"]


@pytest.fixture(scope="module")
def trace_file(plain_wheel: Install, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Traces an application wrote with ``import llmtrace; llmtrace.init()`` from the wheel."""
    work = tmp_path_factory.mktemp("app")
    (work / "app.py").write_text(APP)
    ran = plain_wheel.run("python", "app.py", cwd=work)
    assert ran.returncode == 0, ran.stderr
    return work / ".llmtrace" / "traces.jsonl"


def _report(install: Install, trace_file: Path, cwd: Path) -> dict[str, object]:
    result = install.run("llmtrace", "report", str(trace_file), "--format", "json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    report: dict[str, object] = json.loads(result.stdout)
    return report


def test_import_llmtrace_loads_no_optional_library_even_when_all_are_installed() -> None:
    # This interpreter's environment has every extra installed (scripts/setup.sh).
    modules = {"openai", "anthropic", "httpx2", "requests", "chromadb", "qdrant_client", "faiss"}
    modules |= {"langchain_core", "litellm", "llama_index", "numpy", "fastapi", "llama_cpp"}
    script = (
        "import sys, llmtrace; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(modules)!r}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"


def test_the_wheel_carries_the_package_the_native_reader_and_the_metadata(dist: Dist) -> None:
    arch = platform.machine()
    assert dist.wheel.name == (
        f"llmtrace_otel-{llmtrace.__version__}-cp311-abi3-"
        f"manylinux2014_{arch}.manylinux_2_17_{arch}.whl"
    )
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
        metadata = Parser().parsestr(
            wheel.read(f"llmtrace_otel-{llmtrace.__version__}.dist-info/METADATA").decode()
        )
    assert {"llmtrace/__init__.py", "llmtrace/py.typed", "llmtrace/_native.pyi"} <= names
    assert "llmtrace/_native.abi3.so" in names
    assert metadata["Name"] == DISTRIBUTION
    assert metadata["Version"] == llmtrace.__version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Requires-Python"] == ">=3.11"
    assert "Typing :: Typed" in metadata.get_all("Classifier")
    extras = set(metadata.get_all("Provides-Extra"))
    assert {"openai", "anthropic", "langchain", "litellm", "llama-index", "demo", "all"} <= extras
    # Integration libraries are extras, never requirements of a plain install.
    plain = [r for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    assert not {r.split(">")[0].split("<")[0].split("[")[0] for r in plain} & OPTIONAL


@pytest.mark.parametrize("arch", list(ELF_MACHINES))
def test_each_wheel_is_manylinux_2_17_and_links_no_library_outside_the_policy(
    dist: Dist, arch: str
) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", "--json", str(dist.wheels[arch])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    audit = json.loads(shown.stdout)
    assert audit["overall_tag"] == f"manylinux_2_17_{arch}", audit
    assert audit["external_libs"] == {}, audit
    assert not audit["pure"]
    versions = {v for symbols in audit["versioned_symbols"].values() for v in symbols}
    assert versions and all(v.startswith("GLIBC_") for v in versions), versions
    newest = max(tuple(int(n) for n in v.removeprefix("GLIBC_").split(".")) for v in versions)
    assert newest <= (2, 17), versions


@pytest.mark.parametrize("arch", list(ELF_MACHINES))
def test_each_wheel_s_reader_is_a_shared_library_for_its_architecture(
    dist: Dist, arch: str
) -> None:
    with zipfile.ZipFile(dist.wheels[arch]) as wheel:
        names = set(wheel.namelist())
        header = wheel.read("llmtrace/_native.abi3.so")[:20]
    with zipfile.ZipFile(dist.wheel) as this_machine_s:
        assert names == set(this_machine_s.namelist())  # the same package, reader included
    # e_ident: the magic, 64-bit, little-endian; then e_type (shared object) and e_machine.
    assert header[:4] == b"\x7fELF" and header[4] == 2 and header[5] == 1, header
    assert int.from_bytes(header[16:18], "little") == 3
    assert int.from_bytes(header[18:20], "little") == ELF_MACHINES[arch]


def test_the_sdist_carries_the_native_reader_s_sources(dist: Dist) -> None:
    with tarfile.open(dist.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"native/Cargo.toml", "native/Cargo.lock", "native/src/lib.rs", "LICENSE"} <= names
    assert "CHANGELOG.md" in names
    assert {"llmtrace/_native.pyi", "llmtrace/py.typed", "pyproject.toml"} <= names
    assert not [name for name in names if name.endswith(".so") or "target/" in name]


def test_a_plain_wheel_install_is_small_and_has_no_extra(plain_wheel: Install) -> None:
    assert plain_wheel.added_bytes < PLAIN_INSTALL_MAX_BYTES, plain_wheel.added_bytes
    assert DISTRIBUTION in plain_wheel.installed()
    assert "llmtrace" not in plain_wheel.installed()  # the unrelated project of that name
    assert not plain_wheel.installed() & OPTIONAL


def test_a_plain_wheel_install_runs_help_report_and_demo_s_hint(
    plain_wheel: Install, trace_file: Path, tmp_path: Path
) -> None:
    assert plain_wheel.run("llmtrace", "--help", cwd=tmp_path).returncode == 0
    version = plain_wheel.run("llmtrace", "--version", cwd=tmp_path)
    assert version.stdout == (
        f"llmtrace {llmtrace.__version__}\ntrace files are read by the native reader\n"
    )
    report = _report(plain_wheel, trace_file, tmp_path)
    assert report["traces"] == 20
    assert set(report["stages"]) >= {"retrieval", "other"}  # type: ignore[arg-type]
    demo = plain_wheel.run("llmtrace", "demo", cwd=tmp_path)
    assert demo.returncode == 2
    assert demo.stderr.count("\n") == 1, demo.stderr
    assert f"pip install '{DISTRIBUTION}[demo]'" in demo.stderr
    doctor = plain_wheel.run("llmtrace", "doctor", "--otlp", "http://127.0.0.1:9", cwd=tmp_path)
    assert doctor.returncode == 1, doctor.stderr
    assert "Traceback" not in doctor.stdout + doctor.stderr


def test_a_plain_wheel_install_benches_an_http_target_and_compares(
    plain_wheel: Install, model_server: ModelServer, tmp_path: Path
) -> None:
    (tmp_path / "questions.txt").write_text("What is llmtrace?\nWhere did the time go?\n")
    body = '{"model": "m", "messages": [{"role": "user", "content": "{question}"}]}'
    for name in ("before", "after"):
        bench = plain_wheel.run(
            "llmtrace",
            "bench",
            "--url",
            f"{model_server.base_url}/chat/completions",
            "--body",
            body,
            "--questions",
            "questions.txt",
            "--name",
            name,
            cwd=tmp_path,
        )
        assert bench.returncode == 0, bench.stderr
    runs = tmp_path / ".llmtrace" / "runs"
    compare = plain_wheel.run(
        "llmtrace", "compare", str(runs / "before.json"), str(runs / "after.json"), cwd=tmp_path
    )
    assert compare.returncode == 0, compare.stderr
    assert "end-to-end" in compare.stdout
    assert len(model_server.requests) == 4


def test_an_sdist_installs_without_rust_and_reads_files_in_python(
    installs: dict[str, Install], plain_wheel: Install, trace_file: Path, tmp_path: Path
) -> None:
    from_source = installs["sdist"]
    version = from_source.run("llmtrace", "--version", cwd=tmp_path)
    assert version.returncode == 0
    assert "pure-Python reader" in version.stdout and "without" in version.stdout
    # The same traces give the same report either way (but for the time it was made).
    python_report = _report(from_source, trace_file, tmp_path)
    native_report = _report(plain_wheel, trace_file, tmp_path)
    python_report.pop("generated_at")
    native_report.pop("generated_at")
    assert python_report == native_report


def test_the_openai_extra_alone_traces_a_call(
    installs: dict[str, Install], model_server: ModelServer, tmp_path: Path
) -> None:
    install = installs["openai"]
    assert "openai" in install.installed()
    assert not install.installed() & (OPTIONAL - {"openai", "httpx2"})
    (tmp_path / "app.py").write_text(OPENAI_APP)
    ran = install.run("python", "app.py", model_server.base_url, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "Hello, world!\n"
    report = _report(install, tmp_path / ".llmtrace" / "traces.jsonl", tmp_path)
    assert {"ttft", "generation"} <= set(report["stages"])  # type: ignore[arg-type]


def test_the_lowest_declared_versions_pass(dist: Dist) -> None:
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "test_min_deps.sh")],
        env=clean_environment(LLMTRACE_WHEEL=str(dist.wheel)),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
