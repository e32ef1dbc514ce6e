// Package mcp understands the Model Context Protocol for oncetrace's
// recording proxies (tap --mcp over Streamable HTTP, mcp-stdio over
// stdio): it is told every JSON-RPC message each way and turns each
// tools/call into an attempt of a step, and each successful call of a tool
// that is not read-only into an effect of the MCP server (docs/mcp.md).
//
// It serves no transport: the proxies frame messages (an HTTP body or an
// SSE event's data, a line of stdio) and hand them over, and do what it
// decides for a call (the faults that strike it: forward it late, drop its
// answer, or answer it with an error without forwarding). For stdio that
// proxy is RelayStdio, here: it relays lines between the pipes it is given
// and starts no process. It records through a Recorder, never the store.
// It is a feed: it must not import the store or web.
//
// What it keeps per session is bounded: the calls awaiting an answer (at
// most MaxPending a session; the oldest is recorded unanswered past it)
// and the tools' classes (at most MaxTools).
package mcp
