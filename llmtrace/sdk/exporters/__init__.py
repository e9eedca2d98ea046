"""Span exporters llmtrace adds to the OpenTelemetry SDK's own."""
