package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportReadsTheFileArgument: the file named after the flags, or
// before them, is what import reads; standard input is not.
func TestImportReadsTheFileArgument(t *testing.T) {
	events := writeFile(t, "events.ndjson", secondEffect)
	for _, args := range [][]string{
		{"import", "--db", "DB", events},
		{"import", events, "--db", "DB"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "x.db")
			for i, a := range args {
				if a == "DB" {
					args[i] = db
				}
			}
			out, errOut, code := runCLI(t, args...)
			if code != 0 || !strings.Contains(out, "imported 1 events") {
				t.Fatalf("got exit %d and %q (%s), want exit 0 and 1 event imported", code, out, errOut)
			}
			exported, errOut, code := runCLI(t, "export", "--db", db)
			if code != 0 || !strings.Contains(exported, `"effect_id":"msg_2"`) {
				t.Errorf("export: got exit %d and %q (%s), want the imported effect", code, exported, errOut)
			}
		})
	}
}

// TestArgumentsACommandWouldIgnoreAreRefused: a word a command does not
// read fails it with exit 2 and a message, instead of being ignored.
func TestArgumentsACommandWouldIgnoreAreRefused(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "x.db")
	events := writeFile(t, "events.ndjson", secondEffect)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"import of two files", []string{"import", "--db", db, events, events}, "one file at a time"},
		{"import of --in and a file", []string{"import", "--db", db, "--in", events, events}, "give one"},
		{"export with a file", []string{"export", "--db", db, "out.ndjson"}, `unexpected argument "out.ndjson"`},
		{"audit with a file", []string{"audit", "--db", db, "x"}, `unexpected argument "x"`},
		{"serve with a word", []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "extra"}, `unexpected argument "extra"`},
		{"prune with a word", []string{"prune", "--db", db, "--before", "30d", "extra"}, `unexpected argument "extra"`},
		{"tap with a word", []string{"tap", "extra"}, `unexpected argument "extra"`},
		{"demo with a word", []string{"demo", "--server", "http://127.0.0.1:1", "naive"}, `unexpected argument "naive"`},
		{"demo of an unknown scenario", []string{"demo", "--server", "http://127.0.0.1:1", "--scenario", "naive,bogus"},
			`unknown scenario "bogus"; the scenarios are naive, crash, safe, safe-rerun, key-only, crash-safe`},
		{"version with a word", []string{"version", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tt.args...)
			if code != 2 {
				t.Errorf("got exit %d, want 2; stdout: %s; stderr: %s", code, out, errOut)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr: got %q, want it to say %q", errOut, tt.wantErr)
			}
		})
	}
	// Nothing was refused after a database was created.
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left in %s: got %d, want none", dir, len(entries))
	}
}

// TestVersionFromBuildInfo builds the binary as make build does, with the
// version and commit stamped and VCS information on, and reads them back
// both ways. (In a git worktree the go command records no commit, and the
// stamp is what the binary prints.)
func TestVersionFromBuildInfo(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout, so no commit to find in the build info: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "oncetrace")
	stamp := "-X main.version=v9.9.9-test -X main.commit=" + strings.TrimSpace(string(head))
	build := exec.Command("go", "build", "-buildvcs=auto", "-ldflags", stamp, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var outputs []string
	for _, arg := range []string{"--version", "version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("oncetrace %s: %v", arg, err)
		}
		outputs = append(outputs, string(out))
	}
	if outputs[0] != outputs[1] {
		t.Errorf("--version and version differ: got %q and %q", outputs[0], outputs[1])
	}
	lines := strings.Split(outputs[0], "\n")
	if lines[0] != "oncetrace v9.9.9-test" {
		t.Errorf("first line: got %q, want the stamped version, %q", lines[0], "oncetrace v9.9.9-test")
	}
	for _, want := range []string{"module  github.com/oncetrace/oncetrace", "commit  " + strings.TrimSpace(string(head)), "go      go1."} {
		if !strings.Contains(outputs[0], want) {
			t.Errorf("got %q, want a line with %q", outputs[0], want)
		}
	}

	// The test binary, built without VCS information here, says so.
	out, _, code := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "oncetrace ") || !strings.Contains(out, "commit  ") {
		t.Errorf("--version of the test binary: got exit %d and %q, want a version and a commit line", code, out)
	}
}

// TestFailedServeStartLeavesNoDatabase: a port already taken, serve's own
// or a tap's (which binds after the database is opened), fails the start
// and leaves no new database; an existing one is left as it was.
func TestFailedServeStartLeavesNoDatabase(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()

	for _, tt := range []struct {
		name string
		args []string
	}{
		{"--addr", []string{"--addr", busy}},
		{"--otlp-addr", []string{"--addr", "127.0.0.1:0", "--otlp-addr", busy}},
		{"--smtp", []string{"--addr", "127.0.0.1:0", "--smtp", busy}},
		{"--tap", []string{"--addr", "127.0.0.1:0", "--tap", fmt.Sprintf("mail=http://127.0.0.1:1@%s", busy)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "new.db")
			_, errOut, code := runCLI(t, append([]string{"serve", "--db", db}, tt.args...)...)
			if code == 0 || !strings.Contains(errOut, "address already in use") {
				t.Fatalf("got exit %d and %q, want a failed start naming the port in use", code, errOut)
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if len(names) != 0 {
				t.Errorf("files after the failed start: got %q, want none", names)
			}
		})
	}

	t.Run("an existing database stays", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "old.db")
		if _, errOut, code := runCLI(t, "import", "--db", db, writeFile(t, "events.ndjson", secondEffect)); code != 0 {
			t.Fatalf("import: exit %d: %s", code, errOut)
		}
		if _, _, code := runCLI(t, "serve", "--db", db, "--addr", "127.0.0.1:0", "--tap", "mail=http://127.0.0.1:1@"+busy); code == 0 {
			t.Fatal("serve on a taken tap port: got exit 0, want a failed start")
		}
		out, errOut, code := runCLI(t, "export", "--db", db)
		if code != 0 || !strings.Contains(out, `"effect_id":"msg_2"`) {
			t.Errorf("export after the failed start: got exit %d and %q (%s), want the imported effect", code, out, errOut)
		}
	})
}
