#!/usr/bin/env bash
# The Jaeger UI screenshots in docs/jaeger/ (shown in docs/jaeger.md, "Inspecting traces in Jaeger"),
# made again: runs the browser tests (tests/browser: a real RAG app through the Collector into
# Jaeger, headless Chromium), then trims each chosen screenshot's empty margin and stores it as a
# palette PNG, small enough to keep in the repository.
#   bash scripts/jaeger_screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
LLMTRACE_ARTIFACTS=$work "$PYTHON" -m pytest tests/browser -q -p no:cacheprovider -n 0
mkdir -p docs/jaeger
"$PYTHON" - "$work/jaeger-ui" docs/jaeger <<'PY'
import sys
from pathlib import Path

from PIL import Image, ImageChops

source, target = Path(sys.argv[1]), Path(sys.argv[2])
for name in ("trace-critical-path", "trace-tags-retrieval", "trace-model-span-logs", "monitor-internal"):
    image = Image.open(source / f"{name}.png").convert("RGB")
    # Trim the white below and beside what the page drew.
    box = ImageChops.difference(image, Image.new("RGB", image.size, "white")).getbbox()
    if box:
        image = image.crop((0, 0, image.width, min(image.height, box[3] + 8)))
    path = target / f"{name}.png"
    image.quantize(colors=64).save(path, optimize=True)
    print(f"{path}: {image.width}x{image.height}, {path.stat().st_size // 1024} KB")
PY
