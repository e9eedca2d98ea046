"""One module per ``llmtrace`` subcommand (see ``llmtrace.cli``)."""
