package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// naturalOrderTrace is exec_1 with steps step-123, step-14 and step-2 (in
// the order they ran), each retried without a key and sending two emails:
// as text the ids sort step-123, step-14, step-2.
func naturalOrderTrace() string {
	var b strings.Builder
	b.WriteString(`{"type":"execution","execution_id":"exec_1","status":"running","started_at":"2026-06-30T14:00:00.000Z"}` + "\n")
	for i, id := range []string{"step-123", "step-14", "step-2"} {
		at := func(ms int) string { return fmt.Sprintf("2026-06-30T14:00:%02d.%03dZ", i*10+ms/1000, ms%1000) }
		fmt.Fprintf(&b, `{"type":"attempt","execution_id":"exec_1","step_id":%q,"attempt":1,"tool":"send_email","effect":"write","provider":"mail-api","started_at":%q,"ended_at":%q,"outcome":"timeout"}`+"\n", id, at(100), at(1100))
		fmt.Fprintf(&b, `{"type":"attempt","execution_id":"exec_1","step_id":%q,"attempt":2,"tool":"send_email","effect":"write","provider":"mail-api","started_at":%q,"ended_at":%q,"outcome":"ok"}`+"\n", id, at(1200), at(1500))
		fmt.Fprintf(&b, `{"type":"effect","provider":"mail-api","effect_id":"msg_%d_a","execution_id":"exec_1","step_id":%q,"at":%q}`+"\n", i, id, at(300))
		fmt.Fprintf(&b, `{"type":"effect","provider":"mail-api","effect_id":"msg_%d_b","execution_id":"exec_1","step_id":%q,"at":%q}`+"\n", i, id, at(1300))
	}
	b.WriteString(`{"type":"execution","execution_id":"exec_1","status":"completed","ended_at":"2026-06-30T14:00:40.000Z"}` + "\n")
	return b.String()
}

// TestAuditNaturalOrder: audit lists step-2 before step-14 before step-123,
// from a database and from a server, whose findings API pages them in the
// same order.
func TestAuditNaturalOrder(t *testing.T) {
	db := filepath.Join(t.TempDir(), "order.db")
	if _, errOut, code := runCLI(t, "import", "--db", db, "--in", writeFile(t, "trace.ndjson", naturalOrderTrace())); code != 0 {
		t.Fatalf("import: got exit %d, want 0: %s", code, errOut)
	}
	want := []string{"step-2", "step-14", "step-123"}
	critical := regexp.MustCompile(`(?m)^CRITICAL +duplicate_effect +exec_1 (step-\d+):`)
	steps := func(out string) []string {
		var got []string
		for _, m := range critical.FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
		}
		return got
	}

	out, errOut, code := runCLI(t, "audit", "--db", db)
	if code != 1 {
		t.Fatalf("audit --db: got exit %d, want 1: %s", code, errOut)
	}
	if got := steps(out); !slices.Equal(got, want) {
		t.Errorf("audit --db duplicate_effect steps: got %v, want %v\n%s", got, want, out)
	}

	base, _, stop := startServeOn(t, db)
	defer stop()
	out, errOut, code = runCLI(t, "audit", "--server", base)
	if code != 1 {
		t.Fatalf("audit --server: got exit %d, want 1: %s", code, errOut)
	}
	if got := steps(out); !slices.Equal(got, want) {
		t.Errorf("audit --server duplicate_effect steps: got %v, want %v\n%s", got, want, out)
	}
}
