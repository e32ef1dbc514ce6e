package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command that reads or trims a database, given a path with none there,
// must fail (exit 2, naming the path) and create nothing: audit used to
// create an empty database and call it clean, a silent pass in CI.
func TestReadingCommandsRefuseAMissingDatabase(t *testing.T) {
	tests := []struct {
		name string
		args func(db, dir string) []string
	}{
		{"audit", func(db, _ string) []string { return []string{"audit", "--db", db} }},
		{"audit --json", func(db, _ string) []string { return []string{"audit", "--db", db, "--json"} }},
		{"export", func(db, dir string) []string {
			return []string{"export", "--db", db, "--out", filepath.Join(dir, "out.ndjson")}
		}},
		{"prune", func(db, _ string) []string { return []string{"prune", "--db", db, "--before", "30d"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "typo.db")
			out, errOut, code := runCLI(t, tt.args(db, dir)...)
			if code != 2 {
				t.Errorf("got exit %d, want 2\nstdout: %s\nstderr: %s", code, out, errOut)
			}
			if want := "no such database: " + db; !strings.Contains(errOut, want) {
				t.Errorf("stderr: got %q, want it to say %q", errOut, want)
			}
			if strings.Contains(out, "clean") {
				t.Errorf("stdout: got %q, want no verdict on a database that does not exist", out)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				t.Errorf("got %s created in the directory, want nothing", e.Name())
			}
		})
	}
}

// An export of a server that ran with raised limits imports with the same
// limit flags, unchanged; without them, the over-limit event is refused by
// name and limit, and nothing is cut to fit.
func TestImportTakesTheLimitsTheExportWasAcceptedUnder(t *testing.T) {
	dir := t.TempDir()
	served := filepath.Join(dir, "served.db")
	srv := startMemServer(t, "--db", served, "--max-id-bytes", "512")
	longID := "exec_" + strings.Repeat("x", 295) // 300 bytes: over the default 256
	events := fmt.Sprintf(`{"type":"execution","execution_id":%q,"name":"billing-agent","status":"running","started_at":"2026-06-30T14:00:00.000Z"}
{"type":"execution","execution_id":"exec_short","name":"billing-agent","status":"running","started_at":"2026-06-30T14:00:01.000Z"}
`, longID)
	resp, err := http.Post(srv.url+"/api/v1/events", "application/x-ndjson", strings.NewReader(events))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST a 300-byte id under --max-id-bytes 512: got %d %s, want 2xx", resp.StatusCode, body)
	}

	exported := filepath.Join(dir, "export.ndjson")
	if _, errOut, code := runCLI(t, "export", "--db", served, "--out", exported); code != 0 {
		t.Fatalf("export: got exit %d, want 0: %s", code, errOut)
	}
	export, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	longLine := 0
	for i, l := range strings.Split(string(export), "\n") {
		if strings.Contains(l, longID) {
			longLine = i + 1
		}
	}
	if longLine == 0 {
		t.Fatalf("export: got no line with the 300-byte id:\n%s", export)
	}

	imported := filepath.Join(dir, "imported.db")
	out, errOut, code := runCLI(t, "import", "--db", imported, "--in", exported, "--max-id-bytes", "512")
	if code != 0 {
		t.Fatalf("import --max-id-bytes 512: got exit %d, want 0: %s", code, errOut)
	}
	if want := "imported 2 events, 0 duplicates, 0 rejected\n"; out != want {
		t.Errorf("import --max-id-bytes 512: got %q, want %q", out, want)
	}
	again, errOut, code := runCLI(t, "export", "--db", imported)
	if code != 0 {
		t.Fatalf("export of the import: got exit %d, want 0: %s", code, errOut)
	}
	if !bytes.Equal([]byte(again), export) {
		t.Errorf("export of the import: got\n%s\nwant the served database's export byte for byte:\n%s", again, export)
	}

	defaults := filepath.Join(dir, "defaults.db")
	out, errOut, code = runCLI(t, "import", "--db", defaults, "--in", exported)
	if code != 2 {
		t.Errorf("import without the raised limit: got exit %d, want 2: %s", code, errOut)
	}
	if want := "imported 1 events, 0 duplicates, 1 rejected\n"; out != want {
		t.Errorf("import without the raised limit: got %q, want %q", out, want)
	}
	for _, want := range []string{
		fmt.Sprintf("line %d: execution_id: must be 1 to 256 bytes", longLine),
		"--max-* flags",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("import without the raised limit: stderr %q, want it to say %q", errOut, want)
		}
	}
	rest, errOut, code := runCLI(t, "export", "--db", defaults)
	if code != 0 {
		t.Fatalf("export: got exit %d, want 0: %s", code, errOut)
	}
	if strings.Contains(rest, "exec_x") || !strings.Contains(rest, "exec_short") {
		t.Errorf("after the refused import: got %q, want exec_short alone, the long id neither stored nor cut", rest)
	}
}
