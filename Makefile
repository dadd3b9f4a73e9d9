# The two commands a newcomer needs:  make run   and   make test
# Everything else is installed here: the system packages (system-deps: Java, Maven,
# Chromium and its driver, Prometheus, with apt), then Python deps, Kafka jars,
# Temporal CLI and PostgreSQL.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
TYPED := app pipeline schemas router replay ingress workers scheduler definitions ops relay stack/devstack tests bench
# The real Temporal server of `make test-server` (UI :8333), beside the dev server on 7233.
SERVER_ENV := INGEST_STACK_TEMPORAL=server INGEST_STACK_TEMPORAL_PORT=7333 INGEST_STACK_TEMPORAL_UI_PORT=8333

.PHONY: system-deps install promtool-k8s run test test-unit test-server faults bench lint stack-up stack-down stack-status clean

# The system packages, installed with apt when missing (root); without root or apt it
# stops with one line naming what is missing and how to install it.
system-deps:
	@PYTHON=$(PYTHON) deploy/local/system-deps.sh

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml stack/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required (found %s)" % sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]' -e ./stack
	@touch $@

stack-up: system-deps install
	$(BIN)/ingest stack up $(STACK_UP_FLAGS)

stack-down:
	$(BIN)/ingest stack down

stack-status:
	$(BIN)/ingest stack status

# Run the pipeline on the local stack in the foreground; Ctrl-C stops it cleanly.
# TRACING=1: Jaeger too (`ingest stack up --tracing`), and the processes send it their spans.
ifeq ($(TRACING),1)
run: export INGEST_STACK_TRACING := 1
run: RUN_ENV := INGEST_TRACING=1 OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$${INGEST_STACK_JAEGER_OTLP_HTTP_PORT:-4318}
endif
run: system-deps stack-up
	$(BIN)/ingest migrate
	$(if $(RUN_ENV),@echo "traces: http://127.0.0.1:$${INGEST_STACK_JAEGER_UI_PORT:-16686} (Jaeger)")
	$(RUN_ENV) $(BIN)/ingest run --seed-demo

# The test suite against the real local stack (CI runs exactly this): all of it on the
# dev server, then its real-server subset on the real Temporal server, then 4.5 minutes of
# the soak (tests/soak: private servers, a fault every 50 s: a router kill and three network
# toxics, as the reduced version of issue 40's network scenarios; about 5 minutes in all).
# --secure: the secured listeners and TLS PostgreSQL too (tests/integration/secure/), from
# the start, so no test restarts the shared broker to add them (docs/security.md).
test: STACK_UP_FLAGS := --secure
test: system-deps lint stack-up promtool-k8s keda-schemas
	$(BIN)/ingest stack build
	FAULTS_REPORT=1 $(BIN)/pytest -q -m "not slow and not server_only and not soak" --durations=25 $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory test-server
	SOAK_MINUTES=4.5 SOAK_FAULT_EVERY=50 SOAK_FAULTS=kill_router,net_half_open_pg,net_reset,net_latency \
	  $(BIN)/pytest -q -m soak tests/soak $(PYTEST_ARGS)

# The subset marked temporal_server (tests/conftest.py) on the real Temporal server on
# PostgreSQL, 4 shards (built once with `go install` into ~/.cache; docs/testing.md).
test-server: stack-up
	$(SERVER_ENV) $(BIN)/ingest stack up
	$(SERVER_ENV) FAULTS_REPORT=1 $(BIN)/pytest -q -m "temporal_server and not slow" $(PYTEST_ARGS)

# Full-size fault-injection runs (CI runs the reduced size inside `make test`) with a
# table of figures per scenario. The network scenarios reach the broker through its PROXIED
# listener (docs/local-stack.md); a running broker without it is restarted once to add it.
faults: export INGEST_STACK_KAFKA_PROXIED_PORT ?= 19092
faults: stack-up
	$(BIN)/ingest stack build --proxied
	FAULTS_SCALE=full $(BIN)/pytest -q tests/faults $(PYTEST_ARGS)

# The soak (tests/soak, docs/soak.md): the pipeline on a private real Temporal server (split
# shape), 3 brokers and PostgreSQL for SOAK_MINUTES (60) at half its ceiling, one fault every
# SOAK_FAULT_EVERY s (300) in turn; figures per SOAK_WINDOW s (300) and a timeline PNG.
# Its pipeline processes run on jemalloc, as deploy/Dockerfile's do, when Debian's libjemalloc2
# is installed; on glibc otherwise (a worker then keeps a backlog's step of RSS). A
# SOAK_PIPELINE_ENV of your own replaces it; SOAK_PIPELINE_ENV= (empty) runs on glibc.
comma := ,
JEMALLOC := $(firstword $(wildcard /usr/lib/*-linux-gnu/libjemalloc.so.2))
SOAK_ALLOCATOR_ENV := $(if $(JEMALLOC),LD_PRELOAD=$(JEMALLOC)$(comma)PYTHONMALLOC=malloc)
.PHONY: soak
soak: install
	$(BIN)/ingest stack build --proxied
	@[ -n "$(JEMALLOC)" ] || echo "make soak: no libjemalloc.so.2 (apt-get install libjemalloc2):" \
	  "the pipeline runs on glibc, not on jemalloc as deploy/Dockerfile runs it" >&2
	SOAK_MINUTES=$${SOAK_MINUTES:-60} SOAK_PIPELINE_ENV=$${SOAK_PIPELINE_ENV-$(SOAK_ALLOCATOR_ENV)} \
	  $(BIN)/pytest -q -m soak tests/soak $(PYTEST_ARGS)

# Property-based fuzzing of the whole pipeline (tests/fuzz, docs/testing.md): generated
# records through real ingress, router and worker for FUZZ_MINUTES (30), or FUZZ_RECORDS;
# prints the records tried per kind and the outcomes. FUZZ_SEED=<n> replays a run.
.PHONY: fuzz
fuzz: stack-up
	FUZZ_MINUTES=$${FUZZ_MINUTES:-30} FUZZ_PROJECT_CONSTANTS=$${FUZZ_PROJECT_CONSTANTS:-1} \
		$(BIN)/pytest -q -s tests/fuzz/test_pipeline_fuzz.py $(PYTEST_ARGS)

bench: stack-up
	$(BIN)/python -m pip install -q -e '.[dev,bench]' -e ./stack
	$(BIN)/python -m bench.run_all

# Upstream's promtool, which knows Kubernetes service discovery (Debian's does not), to
# check deploy/prometheus/prometheus-k8s.yml: built once with `go install`, cached outside
# the checkout (tests/support/prometheus.py names the same version and path).
PROMTOOL_K8S_VERSION := v0.316.0
PROMTOOL_K8S := $(HOME)/.cache/ingest/promtool/$(PROMTOOL_K8S_VERSION)/promtool
promtool-k8s: $(PROMTOOL_K8S)
$(PROMTOOL_K8S):
	@mkdir -p $(dir $@)
	GOBIN=$(dir $@).build GOFLAGS=-mod=mod go install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_K8S_VERSION)
	mv $(dir $@).build/promtool $@ && rmdir $(dir $@).build

# KEDA's CRD schemas (ScaledObject, TriggerAuthentication) and the sources of the two
# scalers deploy/k8s/keda uses (their trigger metadata fields), which
# tests/unit/deploy/test_k8s_schemas.py validates the manifests against: taken from KEDA's
# Go module at one version with `go mod download`, cached outside the checkout (the test
# names the same version and path).
.PHONY: keda-schemas
KEDA_VERSION := v2.20.2
KEDA_SCHEMAS := $(HOME)/.cache/ingest/keda/$(KEDA_VERSION)
keda-schemas: $(KEDA_SCHEMAS)/.complete
$(KEDA_SCHEMAS)/.complete:
	@mkdir -p $(dir $@)
	dir=$$(GOFLAGS=-mod=mod go mod download -json github.com/kedacore/keda/v2@$(KEDA_VERSION) \
		| $(PYTHON) -c 'import json, sys; print(json.load(sys.stdin)["Dir"])') && \
	cp $$dir/config/crd/bases/keda.sh_scaledobjects.yaml \
		$$dir/config/crd/bases/keda.sh_triggerauthentications.yaml \
		$$dir/pkg/scalers/kafka_scaler.go $$dir/pkg/scalers/temporal_scaler.go $(dir $@)
	chmod u+w $(dir $@)*
	@touch $@

# The gates that need no service: lint, format, types. `make test` runs them first.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy $(TYPED)

# The unit tests alone: no stack, no service (Java runs the time-skipping test server).
test-unit: install
	INGEST_TEST_NO_STACK=1 $(BIN)/pytest -q tests/unit $(PYTEST_ARGS)

clean: stack-down
	rm -rf .stack $(VENV)
