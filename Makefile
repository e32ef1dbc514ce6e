# oncetrace — the two commands a newcomer needs are `make run` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit too: the go command records none in a git worktree.
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
DB      ?= oncetrace.db
ADDR    ?= 127.0.0.1:8080
FUZZTIME ?= 10s
PKGS    ?= ./...

.PHONY: run test test-steps unit fuzz fuzz-audit bench bench-compare build lint generate check-generated clean fixtures fixtures-temporal axe

## run: serve the UI and APIs on $(ADDR) with the SQLite file $(DB), the demo loaded once (make run ADDR=127.0.0.1:9090 DB=other.db)
# A first build downloads the modules and compiles SQLite: minutes of
# silence but for "go: downloading" (README.md, "The first hour").
run:
	@echo "make run: building oncetrace (the first build downloads ~430 MB of modules and takes minutes; later ones seconds), then serving http://$(ADDR) with $(DB)"
	@$(GO) build -ldflags "$(LDFLAGS)" -o bin/oncetrace ./cmd/oncetrace
	bin/oncetrace serve --addr $(ADDR) --db $(DB) --demo

## test: lint, stale generated code, every test with the race detector, the order-independence test on 250 random histories, short fuzzing; ends with one line: packages, tests, what was skipped and why, minutes
# The steps run in a make of their own so that the last line, written by
# cmd/testsummary from the go test step's report, comes after all of them,
# failed or not.
test:
	@start=$$(date +%s); report=$${TMPDIR:-/tmp}/oncetrace-test-$$$$.json; rm -f "$$report"; \
	$(MAKE) --no-print-directory TEST_REPORT="$$report" test-steps; status=$$?; \
	$(GO) run ./cmd/testsummary -line -report "$$report" -started $$start -status $$status; \
	rm -f "$$report"; exit $$status

TEST_REPORT ?= $(or $(TMPDIR),/tmp)/oncetrace-test.json
test-steps: lint check-generated unit fuzz

# The browser test (web TestBrowser) skips itself without Chromium, and go
# test hides a passing package's output: say it loudly, before and after.
# It looks where the test does: $CHROMIUM, else /usr/bin/chromium or PATH.
CHECK_BROWSER = if [ -n "$$CHROMIUM" ]; then command -v "$$CHROMIUM"; \
	else [ -x /usr/bin/chromium ] || command -v chromium || command -v chromium-browser; fi >/dev/null 2>&1 || \
	echo "!!! chromium not found: the browser test (web TestBrowser) will be SKIPPED; apt-get install chromium, or set ONCETRACE_REQUIRE_BROWSER=1 to make it fail"

# The accessibility browser test skips without axe-core (make axe installs it).
CHECK_AXE = [ -f web/testdata/axe/node_modules/axe-core/axe.min.js ] || \
	echo "!!! axe-core not installed: the accessibility test (web TestBrowserAccessibility) will be SKIPPED; run make axe, or set ONCETRACE_REQUIRE_BROWSER=1 to make it fail"

# -timeout 45m: web's browser suite (a 10,000-attempt execution's page,
# then every fragment it links to) takes about 10 minutes of a loaded
# 2-core machine (18 under -race beside a benchmark), past go test's default
# 10 a package.
unit:
	@$(CHECK_BROWSER)
	@$(CHECK_AXE)
	@[ -n "$$ONCETRACE_TEMPORAL_CLI" ] || [ -x "$$(dirname "$$($(GO) env GOCACHE)")/oncetrace-temporal/temporal-v1.5.1" ] || echo "!!! Temporal CLI not built: the Temporal dev-server tests will be SKIPPED; run make fixtures-temporal (builds it once), or set ONCETRACE_REQUIRE_TEMPORAL=1 to make them fail"
	@[ -n "$$ONCETRACE_TEST_POSTGRES" ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || echo "!!! PostgreSQL not found: the store's PostgreSQL tests will be SKIPPED; apt-get install postgresql, or set ONCETRACE_REQUIRE_POSTGRES=1 to make them fail"
	bash -o pipefail -c '$(GO) test -race -count=1 -timeout 45m -json $(PKGS) | $(GO) run ./cmd/testsummary -report "$(TEST_REPORT)"'
	$(ORDER_TEST)
	@$(CHECK_BROWSER)
	@$(CHECK_AXE)

# web's TestOrderIndependence posts random histories in five orders through
# the real server and compares every answer. The race detector slows SQLite
# some twentyfold, so under -race it posts a few histories (the harness
# stays race-clean) and here, without it, ONCETRACE_ORDER_HISTORIES of them
# (250 by default, 15 to 30 s on two cores).
ORDER_TEST = $(GO) test -count=1 -run '^TestOrderIndependence$$' ./web

## fuzz-audit: the order-independence test on $(AUDIT_HISTORIES) random histories from seed $(AUDIT_SEED) (a new one each run; a failure prints its seed and a shrunk history)
AUDIT_HISTORIES ?= 5000
AUDIT_SEED      ?= $(shell date +%s)
fuzz-audit:
	ONCETRACE_ORDER_HISTORIES=$(AUDIT_HISTORIES) ONCETRACE_ORDER_SEED=$(AUDIT_SEED) bash -o pipefail -c \
		"$(GO) test -count=1 -timeout 3h -v -run '^TestOrderIndependence$$' ./web | grep -v -e '^=== ' -e '--- PASS'"

## fuzz: run each fuzz target for $(FUZZTIME)
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseEvent$$' -fuzztime $(FUZZTIME) ./ingest
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./ingest
	$(GO) test -run '^$$' -fuzz '^FuzzMapOTLP$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./ingest
	$(GO) test -run '^$$' -fuzz '^FuzzReadMessage$$' -fuzztime $(FUZZTIME) ./ingest/feed/smtpsink

## bench: ingest throughput over HTTP against the raw SQLite ceiling, OTLP ingest throughput, ingest with and without 1,000 live readers and their latency, SQLite against PostgreSQL (ingest and pages), and Go benchmarks
bench:
	$(GO) run ./cmd/oncebench all
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-compare: OTLP ingest against Jaeger v1.76 with Badger, the same requests to each, interleaved, medians of 3, against issue 14's goals (builds Jaeger once, ~5 min, then cached)
bench-compare:
	$(GO) run ./cmd/oncebench compare

## build: a static binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/oncetrace ./cmd/oncetrace

## fixtures: regenerate ingest/testdata/frameworks/: the Temporal runs (fixtures-temporal, Go only), then a small agent on real agent frameworks and an MCP client and server through mcp-stdio and tap --mcp (Node 20+ and npm; see its gen/README.md)
# FIXTURES_ONCETRACE names an oncetrace binary to use instead of building one
# from the tree. When npm ci fails three times and the registry does not
# answer, the committed fixtures stay and the target says so loudly; any
# other failure fails it.
FIXTURES_DIR        := ingest/testdata/frameworks
FIXTURES_ONCETRACE  ?=
# FIXTURES_BINARY sets bin to the oncetrace the recordings run:
# FIXTURES_ONCETRACE, or one built from the tree.
FIXTURES_BINARY = bin="$(FIXTURES_ONCETRACE)"; \
	if [ -z "$$bin" ]; then \
		bin=bin/oncetrace-fixtures; \
		echo "$(GO) build -o $$bin ./cmd/oncetrace"; \
		$(GO) build -ldflags "$(LDFLAGS)" -o $$bin ./cmd/oncetrace; \
	fi
FIXTURES_SKIPPED    := !!! SKIPPED: make fixtures could not reach the npm registry; testing the committed fixtures
fixtures: fixtures-temporal
	@set -e; \
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		echo "make fixtures: node or npm is not installed"; echo "$(FIXTURES_SKIPPED)"; exit 0; \
	fi; \
	$(FIXTURES_BINARY); \
	case "$$bin" in /*) ;; *) bin="$(CURDIR)/$$bin" ;; esac; \
	ok=; \
	for i in 1 2 3; do \
		echo "npm ci in $(FIXTURES_DIR)/gen (attempt $$i of 3)"; \
		if (cd $(FIXTURES_DIR)/gen && npm ci --prefer-offline --no-audit --no-fund --fetch-timeout=60000 --fetch-retries=1 --fetch-retry-mintimeout=5000 --fetch-retry-maxtimeout=20000); then ok=1; break; fi; \
		[ $$i = 3 ] || sleep $$((i * 10)); \
	done; \
	if [ -z "$$ok" ]; then \
		if (cd $(FIXTURES_DIR)/gen && timeout 30 npm ping) >/dev/null 2>&1; then \
			echo "make fixtures: npm ci failed 3 times though the npm registry answers: fix package.json or package-lock.json"; exit 1; \
		fi; \
		echo "$(FIXTURES_SKIPPED)"; exit 0; \
	fi; \
	cd $(FIXTURES_DIR)/gen && node run.mjs --oncetrace "$$bin" --out "$(CURDIR)/$(FIXTURES_DIR)"

## fixtures-temporal: record ingest/testdata/frameworks/temporal/{naive,crash,keyed} from a Temporal dev server and Go workers (builds the Temporal CLI once into oncetrace-temporal/ beside GOCACHE, about 9 minutes cold; make fixtures-temporal TEMPORAL_ONLY=crash records one)
TEMPORAL_ONLY ?=
fixtures-temporal:
	@set -e; \
	$(FIXTURES_BINARY); \
	$(GO) run ./ingest/feed/temporal/temporaldemo/recordfixtures --oncetrace "$$bin" --out $(FIXTURES_DIR) $(if $(TEMPORAL_ONLY),--only $(TEMPORAL_ONLY))

## axe: install axe-core (pinned by web/testdata/axe/package-lock.json) for web's TestBrowserAccessibility, which skips without it; three tries, as fixtures
AXE_DIR := web/testdata/axe
axe:
	@set -e; \
	if ! command -v npm >/dev/null 2>&1; then \
		echo "!!! make axe: npm is not installed: TestBrowserAccessibility will be SKIPPED (or fail with ONCETRACE_REQUIRE_BROWSER=1)"; exit 0; \
	fi; \
	for i in 1 2 3; do \
		echo "npm ci in $(AXE_DIR) (attempt $$i of 3)"; \
		if (cd $(AXE_DIR) && npm ci --prefer-offline --no-audit --no-fund --fetch-timeout=60000 --fetch-retries=1 --fetch-retry-mintimeout=5000 --fetch-retry-maxtimeout=20000); then exit 0; fi; \
		[ $$i = 3 ] || sleep $$((i * 10)); \
	done; \
	echo "!!! make axe: npm ci failed 3 times: TestBrowserAccessibility will be SKIPPED (or fail with ONCETRACE_REQUIRE_BROWSER=1)"

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go') | grep -v '_templ.go$$'); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## generate: regenerate templ views (the CLI is pinned as a Go tool in go.mod)
# -log-level error: templ's "Post-generation event" lines say nothing here.
generate:
	$(GO) tool templ generate -log-level error

## check-generated: fail when committed *_templ.go files differ from their sources
check-generated:
	@$(GO) tool templ generate -log-level error
	@stale=$$(git status --porcelain -- '*_templ.go' 2>/dev/null); \
	if [ -n "$$stale" ]; then echo "generated templ code is stale; run make generate and commit:"; echo "$$stale"; exit 1; fi

clean:
	rm -rf bin
