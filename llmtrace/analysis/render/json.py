"""The report as JSON (schema ``llmtrace.report/1``), for machines and ``llmtrace compare``."""

from __future__ import annotations

import json
import math
from typing import Any

from llmtrace.analysis.compare import Comparison
from llmtrace.analysis.report_model import Report


def _finite(value: Any) -> Any:
    # JSON has no NaN/Infinity; an undefined figure is written as null.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def report_json(report: Report, *, indent: int | None = 2) -> str:
    return json.dumps(_finite(report.to_json()), indent=indent, ensure_ascii=False)


def comparison_json(comparison: Comparison, *, indent: int | None = 2) -> str:
    return json.dumps(_finite(comparison.to_json()), indent=indent, ensure_ascii=False)
