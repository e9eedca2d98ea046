"""Trace analysis: read OTLP JSON traces, break each down by stage, summarise, compare.

``sources.load_traces`` → ``report.build_report`` → ``compare.compare``; renderers live in
``llmtrace.analysis.render``.
"""
