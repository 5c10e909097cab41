# eosink: exactly-once Kafka to PostgreSQL. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
GO ?= go
# Every target builds and tests with Go 1.27.3, which the go command fetches through the module
# proxy (golang.org/toolchain) on first use: Go 1.26.8's standard library has 10 known
# vulnerabilities the code reaches (make vuln; docs/security.md). Exported, because a machine
# whose go.env sets GOTOOLCHAIN=local ignores go.mod's toolchain line. `make GOTOOLCHAIN=local`
# uses the installed Go instead.
export GOTOOLCHAIN ?= go1.27.3
# Integration tests run in parallel, each on its own topic, group and schemas.
TEST_PARALLEL ?= 4
TEST_TIMEOUT ?= 40m
# Tests build with failpoints (internal/failpoint); the binaries in bin/ are built without, as shipped.
TEST_TAGS := -tags failpoints

.PHONY: help
help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-16s %s\n", $$1, $$2}'

.PHONY: services
services: ## Start Kafka (KRaft, from Maven Central jars), PostgreSQL (wal_level=logical) and the Apicurio Schema Registry on loopback; writes .services/env
	bash test/services/services.sh up

.PHONY: debezium-fetch
debezium-fetch: ## Fetch Kafka Connect, the Debezium PostgreSQL source and the Apicurio converter (tests start them) into ~/.cache/eosink
	bash test/services/debezium.sh fetch

.PHONY: services-down
services-down: ## Stop the test bed services and delete their data
	bash test/services/services.sh down

.PHONY: services-status
services-status: ## Show whether the test bed services run
	bash test/services/services.sh status

.PHONY: build
build: ## Build bin/eosink, bin/points and bin/cdc (without failpoints, as shipped)
	$(GO) build -o bin/eosink ./cmd/eosink
	$(GO) build -o bin/points ./examples/points
	$(GO) build -o bin/cdc ./examples/cdc

.PHONY: lint
lint: ## gofmt, go vet, and no non-test Go file over 500 lines
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@out=$$(git ls-files '*.go' ':!:*_test.go' | xargs wc -l | awk '$$2 != "total" && $$1 > 500'); if [ -n "$$out" ]; then echo "non-test Go files over 500 lines (split them by concept):"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet $(TEST_TAGS) ./...

.PHONY: vuln
vuln: ## govulncheck against golang.org/x/vulndb, fetched through the Go module proxy and indexed locally (test/vuln.sh)
	bash test/vuln.sh

# The Helm chart's checks build helm from the Go module proxy into a cache, once per version.
HELM_VERSION ?= v3.22.0
TOOLS_DIR ?= $(HOME)/.cache/eosink/tools
HELM ?= $(TOOLS_DIR)/helm-$(HELM_VERSION)/helm
# promtool (check rules) for the alert rules, likewise; its first build takes minutes.
PROMTOOL_VERSION ?= v0.316.0
PROMTOOL ?= $(TOOLS_DIR)/promtool-$(PROMTOOL_VERSION)/promtool

.PHONY: helm-test
helm-test: ## Check the Helm chart (deploy/helm/eosink): helm lint, helm template for several value sets, strict schema checks of the output, eosink run -validate of its pipeline.yaml; the alert rules (promtool check rules) and the Grafana dashboard against the metrics the sink exports; builds helm and promtool into ~/.cache/eosink
	@test -x $(HELM) || { echo "building helm $(HELM_VERSION) into $(dir $(HELM))"; GOBIN=$(dir $(HELM)) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); }
	@test -x $(PROMTOOL) || { echo "building promtool $(PROMTOOL_VERSION) into $(dir $(PROMTOOL)) (takes minutes, once)"; GOBIN=$(dir $(PROMTOOL)) $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION); }
	$(GO) build -o bin/eosink ./cmd/eosink
	cd deploy/helm/test && $(GO) vet ./... && HELM=$(HELM) PROMTOOL=$(PROMTOOL) EOSINK=$(CURDIR)/bin/eosink $(GO) test -count=1 ./...

# The console's browser tests drive Debian's Chromium (internal/console, chromedp).
.PHONY: chromium
chromium: ## Install Debian's chromium for the console's browser tests, when missing (apt-get; needs root or sudo)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
		echo "installing Debian's chromium (the console's browser tests)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

.PHONY: console-test
console-test: chromium ## The console's API and browser tests (a real headless Chromium over a running pipeline); installs chromium when missing. DOCS=1 writes the screenshots into docs/console/
	. test/services/use.sh && $(GO) test $(TEST_TAGS) -race -count=1 -v -run 'Test' ./internal/console

.PHONY: test
test: lint helm-test chromium ## Check the Helm chart, start the services if needed, install chromium if needed, then run every test with -race against the real broker and database (the console's browser tests among them)
	. test/services/use.sh && $(GO) test $(TEST_TAGS) -race -count=1 -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./...

.PHONY: test-unit
test-unit: ## Unit tests only (no services)
	$(GO) test $(TEST_TAGS) -race -count=1 ./internal/failpoint ./internal/pgerr ./internal/names ./sink

.PHONY: cdc-failover
cdc-failover: ## A source failover under a running pipeline (a promoted lagging standby, snapshotted behind and past the old primary's end): test/cdc's TestCDCSourceRewoundPromotedStandby alone (make test runs it too)
	. test/services/use.sh && $(GO) test -tags failpoints -count=1 -v -timeout 30m -run TestCDCSourceRewoundPromotedStandby ./test/cdc

.PHONY: fidelity
fidelity: ## Replica fidelity suite, full form: every type x converter x replica identity through real Debezium into eosink run, every row compared (test/fidelity; make test runs the short form)
	. test/services/use.sh && FIDELITY=full $(GO) test $(TEST_TAGS) -count=1 -v -timeout 3h -run TestFidelity ./test/fidelity

# make chaos: every fault scenario with a longer fault phase; make chaos DURATION=30m: a soak.
CHAOS_SECONDS ?= 60
DURATION ?=

.PHONY: chaos
chaos: ## Fault-injection suite, longer runs; prints a table, JSON to CHAOS_REPORT (default .reports/chaos.json). DURATION=30m soaks
	. test/services/use.sh && CHAOS_SCENARIO_SECONDS=$(CHAOS_SECONDS) CHAOS_SOAK=$(DURATION) \
		$(GO) test $(TEST_TAGS) -count=1 -v -parallel 3 -timeout 24h -run TestChaos ./test/chaos

# make bench: the contenders side by side (change events too: eos_cdc vs peer_cdc), then the curves. BENCH_RECORDS=200000 for a quick run.
BENCH_REPORT ?= .reports/bench.json

.PHONY: bench
bench: ## Throughput side by side (raw COPY, eosink, at-least-once, per-message, Debezium JDBC peer; eosink cdc vs Debezium JDBC upsert/delete on change events, verified; the outbox relay) and curves; JSON to BENCH_REPORT
	. test/services/use.sh && $(GO) build -o bin/bench ./test/bench && BENCH_REPORT=$(BENCH_REPORT) bin/bench

.PHONY: demo
demo: build ## Run the points example end to end: produce, SIGKILL the sink mid-stream, restart, verify
	. test/services/use.sh && bash examples/points/demo.sh

.PHONY: outbox
outbox: build ## The transactional outbox end to end: orders → PostgreSQL + outbox → relay → Kafka → inbox → ledger, with SIGKILLs, a broker and a PostgreSQL restart; verified
	$(GO) build -o bin/outbox ./examples/outbox
	. test/services/use.sh && bash examples/outbox/demo.sh

.PHONY: cdc
cdc: build ## Replicate a PostgreSQL database with Debezium (Avro via the registry) and eosink's cdc plugin; SIGKILL the sink mid-stream, restart, compare rows
	. test/services/use.sh && bash examples/cdc/demo.sh

.PHONY: txdemo
txdemo: build ## The bank invariant through Debezium's transaction metadata: a reader of the replica sees violations in consistency partition (the control), none in consistency transaction under SIGKILLs, a second member, a broker restart and a replay; rows compared. TXDEMO_PHASE=control|transaction|both
	$(GO) build -o bin/bank ./examples/bank
	. test/services/use.sh && bash examples/bank/demo.sh

# make image: the container image (Dockerfile). IMAGE names it; VERSION goes into its labels.
IMAGE ?= eosink:dev
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: image
image: ## Build the container image IMAGE (default eosink:dev); starts a Docker engine, and builds the base images locally when no registry has them
	IMAGE=$(IMAGE) VERSION=$(VERSION) bash test/docker/build-image.sh

.PHONY: test-docker
test-docker: ## Through a Docker engine (started if needed): the image, the testcontainers path of the test bed, and the image's SIGKILL test (docs/docker.md)
	IMAGE=$(IMAGE) VERSION=$(VERSION) bash test/docker/test-docker.sh

.PHONY: clean
clean: ## Remove build output
	rm -rf bin
