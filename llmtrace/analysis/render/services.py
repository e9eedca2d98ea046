"""Words for the critical path by service, shared by the terminal and HTML renderers."""

from __future__ import annotations

from llmtrace.analysis.report_model import Bottleneck
from llmtrace.analysis.units import format_share

SERVICES_TITLE = "Latency by service (critical path)"
SERVICES_NOTE = (
    "Each service's own time on the critical path; a hop's network is its caller's. "
    "A service's stages are shares of the end-to-end time and add up to its share."
)


def bottleneck_place(bottleneck: Bottleneck) -> str:
    """``, 97% of it in service orchestrator`` when the paths cross services, else nothing."""
    if bottleneck.service is None:
        return ""
    return f", {format_share(bottleneck.service_share)} of it in service {bottleneck.service}"
