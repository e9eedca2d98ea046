# Every target is a command from the README or the documentation (docs/).
.PHONY: demo test docs test-min-deps test-newest lock lock-upgrade setup backends lint format benchmarks soak clean

demo:        ## run the demo: a real RAG app on a real local model, ending in the latency breakdown
	bash scripts/setup.sh
	.venv/bin/llmtrace demo

test:        ## the whole test suite (installs everything it needs first)
	bash scripts/test.sh

docs:        ## serve the documentation site on http://127.0.0.1:8000, rebuilt as pages change
	bash scripts/setup.sh
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs serve

test-min-deps: ## the lowest dependency versions pyproject.toml declares, in their own virtualenv
	bash scripts/test_min_deps.sh

test-newest: ## core, instrumentation and analysis tests on the newest releases, when newer than the lock
	LLMTRACE_NEWEST=always bash scripts/test_newest.sh

lock:        ## write requirements/dev.lock again after a change to pyproject.toml's requirements
	bash scripts/lock.sh

lock-upgrade: ## requirements/dev.lock at the newest releases (then make test, and commit the lock)
	bash scripts/lock.sh --upgrade

setup:       ## only create .venv and install llmtrace with every extra
	bash scripts/setup.sh

backends:    ## only build Jaeger v2 and the OpenTelemetry Collector into the cache
	bash scripts/backends.sh

lint:
	.venv/bin/ruff check llmtrace tests benchmarks examples docs/hooks
	.venv/bin/ruff format --check llmtrace tests benchmarks examples docs/hooks
	.venv/bin/mypy llmtrace
	cd native && cargo fmt --check

format:
	.venv/bin/ruff format llmtrace tests benchmarks examples docs/hooks
	.venv/bin/ruff check --fix llmtrace tests benchmarks examples docs/hooks
	cd native && cargo fmt

benchmarks:  ## print the overhead and throughput figures, llmtrace's overhead beside its peers'
	bash scripts/setup.sh
	bash scripts/peers.sh
	.venv/bin/python benchmarks/overhead_core.py
	.venv/bin/python benchmarks/overhead_clients.py --instructions
	.venv/bin/python benchmarks/overhead_peers.py
	.venv/bin/python benchmarks/overhead_frameworks.py
	.venv/bin/python benchmarks/report_throughput.py

soak:        ## 100,000 sequential traced requests: memory stays flat (about 9 minutes)
	.venv/bin/python benchmarks/soak.py

clean:
	rm -rf .llmtrace build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache llmtrace/_native*.so
