// Package mcptest is a test harness for the MCP feed, built on the official
// MCP Go SDK so that tests speak the protocol as real Go MCP clients and
// servers do. It has the shared design's two test programs:
//
//   - NewServer: an invoice server with three tools, send_invoice_email (no
//     annotations), get_invoice (readOnlyHint) and charge_card
//     (idempotentHint, honours an idempotency key), which reports every side
//     effect it really makes (ServerOptions.OnEffect) so a test can count
//     them. ServeHTTP serves it over Streamable HTTP with stateful sessions,
//     ServeStdio on stdin and stdout.
//   - RunClient: the agent loop (connect, tools/list, then get_invoice,
//     send_invoice_email and charge_card), which calls a tool again with the
//     same arguments when a call times out, naive or with an idempotency key.
//
// A test that needs the server as a child process (a stdio proxy's CMD, or
// a separate HTTP server) builds the mcpserver command with BuildServer
// (or BuildInto, once, from a TestMain) and runs the binary; it reports its
// side effects through a file (-effects, read with ReadEffects). The
// mcpagent command is RunClient as a program, for chaos runs
// (BuildCommands builds both).
//
// It is a test helper for feeds: it imports nothing of oncetrace's (no
// store, web or writer), and only tests and the two commands import it.
package mcptest
