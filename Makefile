# oncetrace — the two commands a newcomer needs are `make run` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
DB      ?= oncetrace.db
ADDR    ?= 127.0.0.1:8080
FUZZTIME ?= 10s

.PHONY: run test unit fuzz bench build lint generate check-generated clean

## run: serve the UI and APIs on $(ADDR) with the SQLite file $(DB), the demo loaded once
run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/oncetrace serve --addr $(ADDR) --db $(DB) --demo

## test: lint, stale generated code, every test with the race detector, short fuzzing
test: lint check-generated unit fuzz

# The browser test (web TestBrowser) skips itself without Chromium, and go
# test hides a passing package's output: say it loudly, before and after.
# It looks where the test does: $CHROMIUM, else /usr/bin/chromium or PATH.
CHECK_BROWSER = if [ -n "$$CHROMIUM" ]; then command -v "$$CHROMIUM"; \
	else [ -x /usr/bin/chromium ] || command -v chromium || command -v chromium-browser; fi >/dev/null 2>&1 || \
	echo "!!! chromium not found: the browser test (web TestBrowser) will be SKIPPED; apt-get install chromium, or set ONCETRACE_REQUIRE_BROWSER=1 to make it fail"

unit:
	@$(CHECK_BROWSER)
	$(GO) test -race -count=1 ./...
	@$(CHECK_BROWSER)

## fuzz: run each fuzz target for $(FUZZTIME)
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseEvent$$' -fuzztime $(FUZZTIME) ./ingest
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./ingest

## bench: ingest throughput over HTTP against the raw SQLite ceiling, OTLP ingest throughput, live delivery latency, and Go benchmarks
bench:
	$(GO) run ./cmd/oncebench all
	$(GO) test -run '^$$' -bench . -benchmem ./...

## build: a static binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/oncetrace ./cmd/oncetrace

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go') | grep -v '_templ.go$$'); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## generate: regenerate templ views (the CLI is pinned as a Go tool in go.mod)
generate:
	$(GO) tool templ generate

## check-generated: fail when committed *_templ.go files differ from their sources
check-generated:
	@$(GO) tool templ generate >/dev/null
	@stale=$$(git status --porcelain -- '*_templ.go' 2>/dev/null); \
	if [ -n "$$stale" ]; then echo "generated templ code is stale; run make generate and commit:"; echo "$$stale"; exit 1; fi

clean:
	rm -rf bin
