package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// temporalHistory is a workflow history as `temporal workflow show
// --output json` printed it: SendInvoiceEmail retried to attempt 3 after
// start-to-close timeouts, ChargeCard to attempt 2 after a heartbeat
// timeout (ingest/feed/temporal/map_test.go says what else it holds).
var temporalHistory = filepath.Join("..", "..", "ingest", "feed", "temporal", "testdata", "invoice.json")

func TestImportTemporalHistory(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	args := []string{"import", "--db", db, "--format", "temporal", "--namespace", "default", "--tool-class", "Send*=write", temporalHistory}
	out, errOut, code := runCLI(t, args...)
	if code != 0 || out != "imported 21 events, 0 duplicates, 0 rejected (workflow history: 33 Temporal events)\n" {
		t.Fatalf("import: got exit %d, %q %s; want 21 events imported", code, out, errOut)
	}
	out, errOut, code = runCLI(t, args...)
	if code != 0 || out != "imported 0 events, 21 duplicates, 0 rejected (workflow history: 33 Temporal events)\n" {
		t.Fatalf("import again: got exit %d, %q %s; want every event a duplicate", code, out, errOut)
	}
	out, _, _ = runCLI(t, "audit", "--db", db)
	for _, want := range []string{
		"unkeyed_retry          invoice-050603/8478e81a-707e-491a-a907-017d11492fe6 send-invoice: send-invoice (SendInvoiceEmail) was attempted 3 times",
		"unkeyed_retry          invoice-050603/8478e81a-707e-491a-a907-017d11492fe6 charge-card",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("audit: got\n%s\nwant a line containing %q", out, want)
		}
	}
	if strings.Contains(out, "send-invoice: send-invoice (SendInvoiceEmail) was attempted 3 times and attempts 1, 2, 3 carried no idempotency key — the receiving API cannot tell a retry from a new request (its tool is unclassified") {
		t.Errorf("audit: got\n%s\nwant SendInvoiceEmail classified write by --tool-class", out)
	}
}

func TestImportFormatErrors(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown format", []string{"--format", "otlp", temporalHistory}, `import: --format "otlp": want one of ndjson, temporal`},
		{"not a history", []string{"--format", "temporal", writeFile(t, "h.json", `{"events":[]}`)}, "import: history.events: none"},
		{"bad tool class", []string{"--format", "temporal", "--tool-class", "Send*=loud", temporalHistory}, "import: --tool-class"},
		{"a history read as NDJSON", []string{temporalHistory}, "import: "},
	} {
		_, errOut, code := runCLI(t, append([]string{"import", "--db", db}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: got exit %d, %q; want exit 2 and %q", c.name, code, errOut, c.want)
		}
	}
}
