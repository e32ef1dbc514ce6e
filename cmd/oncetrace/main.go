// Command oncetrace serves the trace viewer and its APIs, and audits,
// imports and exports traces. Configuration is read here, from flags and
// environment variables, and passed down as plain values.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	// The static binary renders pages in a reader's chosen time zone
	// (the oncetrace_tz cookie) on hosts without a zoneinfo database.
	_ "time/tzdata"
)

// version is stamped by `make build` with -ldflags -X.
var version = "dev"

const usage = `oncetrace — an execution-trace viewer that makes duplicate side effects visible

Usage:
  oncetrace serve   [flags]   serve the UI, the ingest and read APIs
  oncetrace demo    [flags]   run the article's scenarios for real against a server
  oncetrace tap     [flags]   a recording proxy in front of an API: its effects go to a server
  oncetrace mcp-stdio [flags] -- CMD ARGS: run a stdio MCP server, relaying and recording its tool calls
  oncetrace chaos   [flags]   -- COMMAND: run an agent under one injected fault at a time; exit 1 on a call unsafe to retry
  oncetrace audit   [flags]   print the audit's findings; exit 1 on any critical one
  oncetrace import  [flags]   [FILE]: load NDJSON events (or, with --format temporal, a Temporal workflow history) from FILE, or standard input, into a database
  oncetrace export  [flags]   write a database's events as NDJSON
  oncetrace prune   [flags]   delete executions older than a date, and reclaim the space
  oncetrace version           the version, commit and Go release this binary was built from (also --version)

Run "oncetrace <command> -h" for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	args := os.Args[2:]
	var err error
	switch os.Args[1] {
	case "serve":
		err = runServe(args)
	case "audit":
		var critical bool
		critical, err = runAudit(args, os.Stdout)
		if err == nil && critical {
			os.Exit(1)
		}
	case "demo":
		err = runDemoCommand(args, os.Stdout)
	case "tap":
		err = runTap(args)
	case "mcp-stdio":
		// It ends as its server did: that status, or its own on an error.
		var code int
		code, err = runMCPStdio(args)
		if err != nil {
			fmt.Fprintln(os.Stderr, "oncetrace:", err)
		}
		os.Exit(code)
	case "demo-worker": // an agent process the demo starts; not for people
		err = runDemoWorker(args)
	case "temporal-worker": // a Temporal worker process demo --temporal starts; not for people
		err = runTemporalWorker(args)
	case "chaos":
		var failed bool
		failed, err = runChaosCommand(args, os.Stdout, os.Stderr)
		if err == nil && failed {
			os.Exit(1)
		}
	case "chaos-demo-agent": // the agent chaos --demo runs; not for people
		err = runChaosDemoAgent(args)
	case "import":
		err = runImport(args, os.Stdin, os.Stdout)
	case "export":
		err = runExport(args, os.Stdout)
	case "prune":
		err = runPrune(args, os.Stdout)
	case "version", "--version", "-version":
		if len(args) > 0 {
			err = fmt.Errorf("version: unexpected argument %q: version takes none", args[0])
			break
		}
		readBuildVersion(version, commit).write(os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "oncetrace: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oncetrace:", err)
		os.Exit(2)
	}
}

// refuseArguments fails when words are left after a command's flags: a
// command that takes none would otherwise ignore them, and any flag after
// them, without a word.
func refuseArguments(command string, fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	return fmt.Errorf("%s: unexpected argument %q: %s takes flags only, and flags after it would not be read either; see oncetrace %s -h",
		command, fs.Arg(0), command, command)
}

// envOr returns the environment variable's value, or def when it is unset.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
