#!/usr/bin/env bash
# Builds the tracing backends that the native stack and the integration tests run: Jaeger v2 and
# an OpenTelemetry Collector with exactly the components collector-config/otel-collector.yaml
# uses. Both come from the Go module proxy and land in a cache outside the repository:
#
#   ${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}/backends/bin/{jaeger,otelcol-llmtrace}
#
# A binary is rebuilt only when its pinned inputs change (backends/jaeger/go.mod and go.sum for
# Jaeger; collector-config/builder-config.yaml and the builder version for the collector), so a
# second run returns at once. The first build takes several minutes per binary.
#
# With --with-prometheus it also builds Prometheus from its Go module (backends/prometheus),
# for the scalable layout's tests: on 2 busy cores about 23 minutes the first time (measured
# while the collector built too), then cached like the others.
#
# Usage: scripts/backends.sh [--force] [--with-prometheus]
# Progress goes to stderr; the last lines on stdout are `jaeger=<path>`, `otelcol=<path>` and
# with --with-prometheus `prometheus=<path>`, for programs that call this script.
set -euo pipefail

readonly BUILDER_VERSION=v0.140.0
readonly HEARTBEAT_SECONDS=20

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_dir="${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}/backends"
bin_dir="$cache_dir/bin"
force=false
with_prometheus=false

for argument in "$@"; do
  case "$argument" in
    --force) force=true ;;
    --with-prometheus) with_prometheus=true ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "backends.sh: unknown argument: $argument (try --help)" >&2; exit 2 ;;
  esac
done

say() { echo "backends: $*" >&2; }

if ! command -v go >/dev/null 2>&1; then
  say "Go is not installed or not on PATH; Go 1.24 or newer is needed (https://go.dev/dl/)."
  exit 1
fi

if ! mkdir -p "$bin_dir" "$cache_dir/logs" 2>/dev/null; then
  say "cannot create the cache directory $cache_dir; set LLMTRACE_CACHE to a writable directory."
  exit 1
fi

# Two test runs starting at once must not build into the same directory.
exec 9>"$cache_dir/.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi

fingerprint() {
  # The key that says whether a cached binary was built from the current pins.
  { echo "$@"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16
}

is_current() {
  local binary="$1" key="$2"
  [[ "$force" == false && -x "$binary" && -f "$binary.stamp" ]] &&
    [[ "$(cat "$binary.stamp")" == "$key" ]]
}

# Runs a long build with its output in a log file and a line of progress every few seconds,
# because `go build` prints nothing until it is done.
run_logged() {
  local name="$1" log="$2"
  shift 2
  local started=$SECONDS
  "$@" >"$log" 2>&1 &
  local build_pid=$!
  local next_report=$((started + HEARTBEAT_SECONDS))
  while kill -0 "$build_pid" 2>/dev/null; do
    sleep 1
    if (( SECONDS >= next_report )); then
      next_report=$((SECONDS + HEARTBEAT_SECONDS))
      say "$name: building, $((SECONDS - started))s so far, $(grep -c . "$log" || true) packages" \
        "(log: $log)"
    fi
  done
  if ! wait "$build_pid"; then
    say "$name: build FAILED after $((SECONDS - started))s; last lines of $log:"
    tail -n 30 "$log" >&2
    return 1
  fi
  say "$name: built in $((SECONDS - started))s"
}

# Builds the Go module pinned in backends/NAME (go.mod and go.sum) into $bin_dir/NAME.
build_pinned() {
  local name="$1" module="$2" package="$3" ldflags="$4"
  local module_dir="$repo_root/backends/$name"
  local version
  version="$(awk -v module="$module" '$1 == module { print $2 }' "$module_dir/go.mod")"
  local key
  key="$name $version $(fingerprint "$(cat "$module_dir/go.mod" "$module_dir/go.sum")")"
  local binary="$bin_dir/$name"
  if is_current "$binary" "$key"; then
    say "$name $version: up to date ($binary)"
    return
  fi
  say "$name $version: building from the Go module proxy (first time: several minutes)"
  run_logged "$name $version" "$cache_dir/logs/$name.log" \
    env -C "$module_dir" go build -mod=readonly -v -ldflags "$ldflags" -o "$binary.tmp" "$package"
  mv -f "$binary.tmp" "$binary"
  echo "$key" >"$binary.stamp"
}

build_jaeger() {
  # v1.76.0 of the Go module is the Jaeger v2.13.0 release; the ldflag makes `jaeger version`
  # say so, as the released binary does.
  build_pinned jaeger github.com/jaegertracing/jaeger github.com/jaegertracing/jaeger/cmd/jaeger \
    "-s -w -X github.com/jaegertracing/jaeger/internal/version.latestVersion=v2.13.0"
}

build_collector() {
  local manifest="$repo_root/collector-config/builder-config.yaml"
  local key
  key="otelcol $BUILDER_VERSION $(fingerprint "$BUILDER_VERSION" "$(cat "$manifest")")"
  local binary="$bin_dir/otelcol-llmtrace"
  if is_current "$binary" "$key"; then
    say "otelcol-llmtrace: up to date ($binary)"
    return
  fi
  local builder="$cache_dir/tools/builder-$BUILDER_VERSION"
  if [[ ! -x "$builder/builder" ]]; then
    say "installing the OpenTelemetry Collector builder $BUILDER_VERSION"
    run_logged "builder $BUILDER_VERSION" "$cache_dir/logs/builder-install.log" \
      env GOBIN="$builder" go install "go.opentelemetry.io/collector/cmd/builder@$BUILDER_VERSION"
  fi
  # The builder writes its generated sources next to where it runs, so it runs in the cache.
  local work_dir="$cache_dir/build/otelcol"
  rm -rf "$work_dir"
  mkdir -p "$work_dir"
  cp "$manifest" "$work_dir/builder-config.yaml"
  say "otelcol-llmtrace: building from the Go module proxy (first time: several minutes)"
  if ! run_logged "otelcol-llmtrace" "$cache_dir/logs/otelcol.log" \
    env -C "$work_dir" GOFLAGS=-mod=mod "$builder/builder" --config builder-config.yaml; then
    # A module proxy that mirrors modules but not the checksum database for all of them (the
    # loadbalancing exporter's AWS and Kubernetes dependencies) fails the verification with
    # 404s. Unless the environment chose its own GOSUMDB, build again trusting the proxy.
    if [[ -n "${GOSUMDB:-}" ]] || ! grep -q "sumdb.*404 Not Found" "$cache_dir/logs/otelcol.log"; then
      return 1
    fi
    say "otelcol-llmtrace: the checksum database lacks some modules (404); building with the" \
      "module proxy's checksums alone (GOSUMDB=off)"
    rm -rf "$work_dir/otelcol-llmtrace"
    run_logged "otelcol-llmtrace" "$cache_dir/logs/otelcol.log" \
      env -C "$work_dir" GOFLAGS=-mod=mod GOSUMDB=off "$builder/builder" --config builder-config.yaml
  fi
  mv -f "$work_dir/otelcol-llmtrace/otelcol-llmtrace" "$binary"
  echo "$key" >"$binary.stamp"
}

build_prometheus() {
  build_pinned prometheus github.com/prometheus/prometheus \
    github.com/prometheus/prometheus/cmd/prometheus "-s -w"
}

build_jaeger
build_collector
if [[ "$with_prometheus" == true ]]; then
  build_prometheus
fi
echo "jaeger=$bin_dir/jaeger"
echo "otelcol=$bin_dir/otelcol-llmtrace"
if [[ "$with_prometheus" == true ]]; then
  echo "prometheus=$bin_dir/prometheus"
fi
