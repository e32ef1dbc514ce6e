// Command mcpserver is mcptest's invoice MCP server as a program, for tests
// that need it in another process: a stdio proxy's child, or a server
// chaos runs. Tests build it with mcptest.BuildServer.
//
// Usage:
//
//	mcpserver [-http ADDR] [-effects FILE] [-calls FILE] [-lose-first TOOL,...]
//	          [-mail-url URL] [-hold-limit DURATION] [-name NAME]
//
// Without -http it serves one session on stdin and stdout and exits when
// stdin closes. With -http it serves Streamable HTTP on ADDR (such as
// 127.0.0.1:0), prints the endpoint's URL as the first line on stdout and
// runs until SIGINT or SIGTERM. -effects appends every side effect it
// really makes (mcptest.Effect) and -calls every tools/call it receives
// (mcptest.ToolCall) to FILE as JSON lines, written before the call is
// answered; mcptest.ReadEffects and ReadCalls read them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/mcp/mcptest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}

func run() error {
	httpAddr := flag.String("http", "", "serve Streamable HTTP on `ADDR` instead of stdio")
	effects := flag.String("effects", "", "append every side effect made to `FILE` as JSON lines")
	calls := flag.String("calls", "", "append every tools/call received to `FILE` as JSON lines")
	loseFirst := flag.String("lose-first", "", "hold the answer to the first call of each `TOOL` (comma-separated) until the client gives up")
	mailURL := flag.String("mail-url", "", "send emails through the sandbox mail API at `URL` (.../sandbox/mail/v1/send)")
	holdLimit := flag.Duration("hold-limit", 30*time.Second, "answer a held call after this long if the client never gives up")
	name := flag.String("name", mcptest.DefaultServerName, "the server's serverInfo.name")
	flag.Parse()

	opts := mcptest.ServerOptions{Name: *name, MailURL: *mailURL, HoldLimit: *holdLimit}
	if *loseFirst != "" {
		opts.LoseResponse = mcptest.LoseFirst(strings.Split(*loseFirst, ",")...)
	}
	if *effects != "" {
		f, err := mcptest.OpenJSONLines(*effects)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.OnEffect = func(e mcptest.Effect) { f.Append(e) }
	}
	if *calls != "" {
		f, err := mcptest.OpenJSONLines(*calls)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.OnCall = func(c mcptest.ToolCall) { f.Append(c) }
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *httpAddr == "" {
		return mcptest.ServeStdio(ctx, opts)
	}
	url, stopHTTP, err := mcptest.ServeHTTP(*httpAddr, opts)
	if err != nil {
		return err
	}
	fmt.Println(url)
	<-ctx.Done()
	stopHTTP()
	return nil
}
