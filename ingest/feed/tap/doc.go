// Package tap is oncetrace's recording proxy: a reverse proxy a user puts
// between an agent and any HTTP API, which records every side effect the
// API acknowledged as an effect (provider, effect id, idempotency key,
// target, the request's W3C trace context, the fingerprint of what it
// asked: feed.HTTPRequest) and can inject the sandbox's
// faults on the way. It passes requests and responses through unchanged
// and streams bodies, looking at no more than a bounded prefix of each;
// a failure to record never fails the proxied request. It records only
// what it forwarded, and an upstream that does not answer in time gets
// the client a 504 without cancelling the request: an effect the upstream
// makes later is still recorded. It reads no flags
// and no environment, and stores nothing itself: effects go to a Recorder.
//
// In MCP mode (Config.MCP, mcp.go) it sits in front of a Streamable HTTP
// MCP server instead: it tells an mcp.Observer every message each way (a
// POST's body, each JSON answer, each SSE event as the stream passes),
// and the observer records tools/calls as attempts and effects and says
// which faults strike a call.
//
// It is a feed (package feed): it must not import the store or web.
// cmd/oncetrace runs it, alone (oncetrace tap, recording over HTTP) or
// beside the server (serve --tap, recording through the writer).
package tap
