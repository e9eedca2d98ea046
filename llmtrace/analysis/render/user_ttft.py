"""The sentences both renderers print about user-perceived time to first token."""

from __future__ import annotations

from llmtrace.analysis.report_model import UserPerceivedTTFT
from llmtrace.analysis.units import format_seconds, format_signed_seconds


def user_ttft_lines(user: UserPerceivedTTFT) -> list[str]:
    """What the user waited for, the model's own TTFT, and what the service added between."""
    sees = user.user_sees
    if sees is None:
        return []
    what = "first SSE event" if user.first_event else "first body byte"
    lines = [
        f"User-perceived time to first token ({what} at the client): P50 "
        f"{format_seconds(sees.p50)}, P95 {format_seconds(sees.p95)} over {user.requests} requests"
    ]
    if user.first_event and user.first_byte:
        lines.append(
            f"First body byte at the client: P50 {format_seconds(user.first_byte.p50)}, "
            f"P95 {format_seconds(user.first_byte.p95)}"
        )
    model = user.model_ttft
    if model is None or user.service_adds_p50 is None or user.service_adds_p95 is None:
        lines.append("No model call of the service joined these traces: its own TTFT is unknown")
    else:
        lines.append(
            f"The model's own TTFT inside the service: P50 {format_seconds(model.p50)}, P95 "
            f"{format_seconds(model.p95)}; the service adds "
            f"{format_signed_seconds(user.service_adds_p50)} at P50 and "
            f"{format_signed_seconds(user.service_adds_p95)} at P95 before the user sees anything"
        )
    return lines
