package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CLIVersion is the Temporal CLI that temporalcli/go.mod requires (v1.5.1,
// Temporal Server 1.29.1; v1.9.1 cannot be built with the module proxy: its
// go.mod replaces a nested module with a local directory). A test checks
// that the two agree.
const CLIVersion = "v1.5.1"

// EnvCLI names a temporal binary to use instead of the cached build.
const EnvCLI = "ONCETRACE_TEMPORAL_CLI"

// EnvRequire, set to 1 (as CI does), turns "no Temporal CLI here" from a
// skip into a failure.
const EnvRequire = "ONCETRACE_REQUIRE_TEMPORAL"

// ErrNoBinary is wrapped by Binary when neither EnvCLI nor the cache has a
// temporal binary.
var ErrNoBinary = errors.New("devserver: no Temporal CLI")

// CachePath is where Build puts the CLI of CLIVersion:
// $(dirname GOCACHE)/oncetrace-temporal/temporal-v1.5.1, beside the Go build
// cache so that CI's cache of GOCACHE's parent keeps it.
func CachePath() (string, error) {
	gocache := os.Getenv("GOCACHE")
	if gocache == "" {
		out, err := exec.Command("go", "env", "GOCACHE").Output()
		if err != nil {
			return "", fmt.Errorf("devserver: go env GOCACHE: %w", err)
		}
		gocache = strings.TrimSpace(string(out))
	}
	if gocache == "" || gocache == "off" {
		return "", fmt.Errorf("devserver: GOCACHE is %q: no place for the Temporal CLI", gocache)
	}
	return filepath.Join(filepath.Dir(gocache), "oncetrace-temporal", "temporal-"+CLIVersion), nil
}

// Binary returns the temporal binary to run: EnvCLI when set (it must
// exist), else the cached build. The error wraps ErrNoBinary and says how to
// get one.
func Binary() (string, error) {
	if p := os.Getenv(EnvCLI); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", ErrNoBinary, EnvCLI, p, err)
		}
		return p, nil
	}
	p, err := CachePath()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoBinary, err)
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w at %s: run `make fixtures` (builds it once, about 9 minutes) or set %s", ErrNoBinary, p, EnvCLI)
	}
	return p, nil
}

// Build returns the cached CLI of CLIVersion, building it first from the
// module in moduleDir (the repository's ingest/feed/temporal/devserver/
// temporalcli) when it is missing: about nine minutes on two cores. The
// binary is built beside its final name and renamed into place, so a build
// cut short never leaves a broken binary to reuse. EnvCLI, when set, wins.
func Build(ctx context.Context, moduleDir string, log io.Writer) (string, error) {
	if p := os.Getenv(EnvCLI); p != "" {
		return Binary()
	}
	bin, err := CachePath()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err == nil {
		fmt.Fprintf(log, "temporal CLI %s: cached at %s\n", CLIVersion, bin)
		return bin, nil
	}
	if v, err := moduleCLIVersion(moduleDir); err != nil {
		return "", err
	} else if v != CLIVersion {
		return "", fmt.Errorf("devserver: %s requires the Temporal CLI %s, the code expects %s: change both", filepath.Join(moduleDir, "go.mod"), v, CLIVersion)
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("devserver: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(bin), filepath.Base(bin)+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("devserver: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	fmt.Fprintf(log, "building the Temporal CLI %s into %s (once; about 9 minutes on 2 cores)\n", CLIVersion, bin)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp.Name(), "github.com/temporalio/cli/cmd/temporal")
	cmd.Dir = moduleDir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("devserver: building the Temporal CLI in %s: %w", moduleDir, err)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", fmt.Errorf("devserver: %w", err)
	}
	return bin, nil
}

// moduleCLIVersion reads the version of github.com/temporalio/cli that the
// module in dir requires.
func moduleCLIVersion(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("devserver: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "github.com/temporalio/cli" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("devserver: %s does not require github.com/temporalio/cli", filepath.Join(dir, "go.mod"))
}
