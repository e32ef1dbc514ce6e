package mcptest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// Packages of the harness's commands.
const (
	ServerPackage = "github.com/oncetrace/oncetrace/ingest/feed/mcp/mcptest/mcpserver"
	AgentPackage  = "github.com/oncetrace/oncetrace/ingest/feed/mcp/mcptest/mcpagent"
)

// BuildServer builds the mcpserver command into t.TempDir() and returns
// the binary's path. Run with no flags it serves stdio, so a test gives it
// to a stdio proxy or to ClientOptions.Command; its package doc has the
// flags (-effects FILE counts side effects across the process boundary,
// -lose-first TOOL, -mail-url URL, -http ADDR). It runs `go build`, which
// the test's own build has mostly cached: a second or two to link.
func BuildServer(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := BuildInto(dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "mcpserver")
}

// BuildCommands builds the mcpserver and mcpagent (RunClient as a
// program, for chaos runs) commands into t.TempDir() in one `go build`
// and returns their paths.
func BuildCommands(t testing.TB) (server, agent string) {
	t.Helper()
	dir := t.TempDir()
	if err := BuildInto(dir, AgentPackage); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "mcpserver"), filepath.Join(dir, "mcpagent")
}

// BuildInto builds mcpserver, and the other command packages given, into
// dir, each binary named after its package's last element. It is for a
// TestMain that builds once for a whole test binary.
func BuildInto(dir string, more ...string) error {
	args := append([]string{"build", "-o", dir + string(filepath.Separator), ServerPackage}, more...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mcptest: go %v: %v\n%s", args, err, out)
	}
	return nil
}
