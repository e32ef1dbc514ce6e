// Command mcpagent is mcptest's agent loop (mcptest.RunClient) as a
// program, for chaos runs and by hand: it connects to an MCP server, lists
// its tools, calls get_invoice, send_invoice_email and charge_card, calls a
// timed-out tool once more with the same arguments, prints the run's
// mcptest.ClientReport as JSON on stdout, and exits 1 if a call ended
// without an answer or with an error.
//
// Usage:
//
//	mcpagent -url URL [flags]                  Streamable HTTP
//	mcpagent [flags] -- CMD ARGS...            stdio, launching CMD
//	mcpagent -upstream NAME [flags]            as oncetrace chaos names it:
//	    ONCETRACE_UPSTREAM_<NAME> (a URL) or ONCETRACE_MCP_<NAME>_COMMAND
//	    (a command line, split at spaces)
//
// Flags: -keyed, -timeout DURATION, -fault KIND -fault-tool TOOL,
// -traceparent, -protocol VERSION, -name NAME.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/oncetrace/oncetrace/ingest/feed/mcp/mcptest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpagent:", err)
		os.Exit(1)
	}
}

func run() error {
	var opts mcptest.ClientOptions
	flag.StringVar(&opts.URL, "url", "", "the Streamable HTTP MCP endpoint")
	upstream := flag.String("upstream", "", "take the server from ONCETRACE_UPSTREAM_`NAME` or ONCETRACE_MCP_NAME_COMMAND")
	flag.BoolVar(&opts.Keyed, "keyed", false, "pass an idempotency key, the same on both tries")
	flag.DurationVar(&opts.CallTimeout, "timeout", 0, "each tools/call's timeout (default 2s)")
	flag.StringVar(&opts.Fault, "fault", "", "ask a recording proxy for this fault on the first try of -fault-tool")
	flag.StringVar(&opts.FaultTool, "fault-tool", mcptest.ToolSendInvoiceEmail, "the tool -fault applies to")
	flag.BoolVar(&opts.Traceparent, "traceparent", false, "put a W3C traceparent in params._meta")
	flag.StringVar(&opts.ProtocolVersion, "protocol", "", "the protocol version to offer (default the SDK's newest)")
	flag.StringVar(&opts.Name, "name", mcptest.DefaultClientName, "the client's clientInfo.name")
	flag.Parse()

	if *upstream != "" {
		name := strings.ToUpper(*upstream)
		if url := os.Getenv("ONCETRACE_UPSTREAM_" + name); url != "" {
			opts.URL = url
		} else if line := strings.Fields(os.Getenv("ONCETRACE_MCP_" + name + "_COMMAND")); len(line) > 0 {
			opts.Command, opts.Args = line[0], line[1:]
		} else {
			return fmt.Errorf("-upstream %s: neither ONCETRACE_UPSTREAM_%s nor ONCETRACE_MCP_%s_COMMAND is set", *upstream, name, name)
		}
	}
	if args := flag.Args(); len(args) > 0 {
		opts.Command, opts.Args = args[0], args[1:]
	}
	if opts.URL == "" && opts.Command == "" {
		return errors.New("give -url URL, -upstream NAME or -- CMD ARGS")
	}
	opts.Stderr = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, runErr := mcptest.RunClient(ctx, opts)
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(report); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}
