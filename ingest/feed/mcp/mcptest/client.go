package mcptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The arguments the agent loop calls the tools with.
const (
	DefaultInvoiceID = "inv_1001"
	DefaultEmail     = "billing@example.com"
	DefaultCustomer  = "cus_42"
	DefaultAmount    = 4200
)

// DefaultClientName is the client's clientInfo.name when none is given.
const DefaultClientName = "mcptest-agent"

// LegacyProtocolVersion is the newest protocol version with the initialize
// handshake and stateful sessions. Over stdio the SDK's client and server
// otherwise agree on a newer, sessionless version (server/discover, no
// initialize); over stateful Streamable HTTP they fall back to it anyway.
const LegacyProtocolVersion = "2025-11-25"

// ClientOptions configures RunClient. Exactly one of URL and Command is set.
type ClientOptions struct {
	// URL is a Streamable HTTP MCP endpoint.
	URL string
	// HTTPClient makes the HTTP requests; http.DefaultClient when nil.
	HTTPClient *http.Client

	// Command and Args launch a stdio MCP server through the SDK's
	// CommandTransport; Env is its environment (the parent's when nil) and
	// Stderr receives its standard error (discarded when nil).
	Command string
	Args    []string
	Env     []string
	Stderr  io.Writer

	// Name is the client's clientInfo.name; DefaultClientName when empty.
	Name string
	// ProtocolVersion is offered when connecting; the SDK's newest when
	// empty (see LegacyProtocolVersion).
	ProtocolVersion string
	// CallTimeout bounds each tools/call; 2 s when zero. A call that times
	// out is made once more with the same arguments.
	CallTimeout time.Duration
	// Keyed passes an idempotency key, the same on both tries, in
	// params._meta["io.oncetrace/idempotency-key"] of send_invoice_email and
	// charge_card, and as charge_card's idempotency_key argument. Keys are
	// new for every run. Without it the client is naive: no keys.
	Keyed bool
	// Fault, when set with FaultTool, goes into
	// params._meta["io.oncetrace/fault"] of the first try of FaultTool's
	// call (such as "lose-response"), for a recording proxy to inject; the
	// retry carries none.
	Fault     string
	FaultTool string
	// Traceparent puts a W3C traceparent into params._meta.traceparent of
	// every tools/call: one trace for the run, a new span for each try.
	Traceparent bool
}

// ClientReport is what one run of the agent loop did.
type ClientReport struct {
	// ProtocolVersion is the version the session agreed on.
	ProtocolVersion string `json:"protocol_version"`
	// SessionID is the Mcp-Session-Id over Streamable HTTP; empty over stdio.
	SessionID string `json:"session_id,omitempty"`
	// TraceID is the run's trace when ClientOptions.Traceparent is set.
	TraceID string `json:"trace_id,omitempty"`
	// Tools is the tools/list answer.
	Tools []*mcp.Tool `json:"tools"`
	// Calls are the tool calls in the order made: get_invoice,
	// send_invoice_email, charge_card.
	Calls []CallReport `json:"calls"`
}

// CallReport is one tool call of the agent loop, with its tries.
type CallReport struct {
	Tool           string         `json:"tool"`
	Arguments      map[string]any `json:"arguments"`
	IdempotencyKey string         `json:"idempotency_key,omitempty"`
	Tries          []TryReport    `json:"tries"`
	// ID is structuredContent.id of the answered try, if one was answered.
	ID string `json:"id,omitempty"`
}

// TryReport is one tools/call request.
type TryReport struct {
	Outcome     string        `json:"outcome"` // OutcomeOK, OutcomeError or OutcomeTimeout
	Error       string        `json:"error,omitempty"`
	Traceparent string        `json:"traceparent,omitempty"`
	Fault       string        `json:"fault,omitempty"`
	ID          string        `json:"id,omitempty"` // structuredContent.id
	Duration    time.Duration `json:"duration"`
}

// Outcomes of a try, as the shared design names an attempt's.
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error" // isError, or a JSON-RPC or transport error
	OutcomeTimeout = "timeout"
)

// Call returns the report of tool's call, or nil.
func (r ClientReport) Call(tool string) *CallReport {
	for i := range r.Calls {
		if r.Calls[i].Tool == tool {
			return &r.Calls[i]
		}
	}
	return nil
}

// Tool returns the tools/list entry of name, or nil.
func (r ClientReport) Tool(name string) *mcp.Tool {
	for _, t := range r.Tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// RunClient runs the agent loop once: connect (initialize, or the SDK's
// server/discover), tools/list, then get_invoice, send_invoice_email and
// charge_card, each called again with the same arguments if it times out.
// The error names the calls that ended without an answer or with an error;
// the report holds everything done up to then and is filled even so.
func RunClient(ctx context.Context, opts ClientOptions) (ClientReport, error) {
	var report ClientReport
	transport, err := clientTransport(opts)
	if err != nil {
		return report, err
	}
	if opts.Name == "" {
		opts.Name = DefaultClientName
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 2 * time.Second
	}
	client := mcp.NewClient(&mcp.Implementation{Name: opts.Name, Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: opts.ProtocolVersion})
	if err != nil {
		return report, fmt.Errorf("mcptest: connect: %w", err)
	}
	defer session.Close()
	report.ProtocolVersion = session.InitializeResult().ProtocolVersion
	report.SessionID = session.ID()

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		return report, fmt.Errorf("mcptest: tools/list: %w", err)
	}
	report.Tools = tools.Tools

	run := randomHex(8)
	if opts.Traceparent {
		report.TraceID = randomHex(16)
	}
	calls := []CallReport{
		{Tool: ToolGetInvoice, Arguments: map[string]any{"invoice_id": DefaultInvoiceID}},
		{Tool: ToolSendInvoiceEmail, Arguments: map[string]any{"to": DefaultEmail, "invoice_id": DefaultInvoiceID}},
		{Tool: ToolChargeCard, Arguments: map[string]any{"amount": DefaultAmount, "customer": DefaultCustomer}},
	}
	var failed []error
	for _, call := range calls {
		if opts.Keyed && call.Tool != ToolGetInvoice {
			call.IdempotencyKey = "mcptest-" + run + "-" + call.Tool
			if call.Tool == ToolChargeCard {
				call.Arguments["idempotency_key"] = call.IdempotencyKey
			}
		}
		if err := callWithRetry(ctx, session, opts, report.TraceID, &call); err != nil {
			failed = append(failed, err)
		}
		report.Calls = append(report.Calls, call)
		if ctx.Err() != nil {
			break
		}
	}
	return report, errors.Join(failed...)
}

func clientTransport(opts ClientOptions) (mcp.Transport, error) {
	switch {
	case (opts.URL == "") == (opts.Command == ""):
		return nil, errors.New("mcptest: give a URL or a Command, not both or neither")
	case opts.URL != "":
		return &mcp.StreamableClientTransport{Endpoint: opts.URL, HTTPClient: opts.HTTPClient}, nil
	}
	cmd := exec.Command(opts.Command, opts.Args...)
	cmd.Env, cmd.Stderr = opts.Env, opts.Stderr
	return &mcp.CommandTransport{Command: cmd}, nil
}

// callWithRetry makes call's tries: one, and one more with the same
// arguments if the first times out.
func callWithRetry(ctx context.Context, session *mcp.ClientSession, opts ClientOptions, traceID string, call *CallReport) error {
	for try := 1; try <= 2; try++ {
		meta := mcp.Meta{}
		if call.IdempotencyKey != "" {
			meta[MetaIdempotencyKey] = call.IdempotencyKey
		}
		var report TryReport
		if opts.Fault != "" && opts.FaultTool == call.Tool && try == 1 {
			report.Fault = opts.Fault
			meta[MetaFault] = opts.Fault
		}
		if traceID != "" {
			report.Traceparent = "00-" + traceID + "-" + randomHex(8) + "-01"
			meta[MetaTraceparent] = report.Traceparent
		}
		params := &mcp.CallToolParams{Name: call.Tool, Arguments: call.Arguments}
		if len(meta) > 0 {
			params.Meta = meta
		}
		// The SDK ends a call when its context does: it stops waiting,
		// sends notifications/cancelled and keeps the session usable.
		callCtx, cancel := context.WithTimeout(ctx, opts.CallTimeout)
		began := time.Now()
		result, err := session.CallTool(callCtx, params)
		report.Duration = time.Since(began)
		timedOut := err != nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		switch {
		case timedOut:
			report.Outcome, report.Error = OutcomeTimeout, fmt.Sprintf("no answer within %s", opts.CallTimeout)
		case err != nil:
			report.Outcome, report.Error = OutcomeError, err.Error()
		case result.IsError:
			report.Outcome, report.Error = OutcomeError, resultText(result)
		default:
			report.Outcome, report.ID = OutcomeOK, structuredID(result)
		}
		call.Tries = append(call.Tries, report)
		switch {
		case report.Outcome == OutcomeOK:
			call.ID = report.ID
			return nil
		case report.Outcome != OutcomeTimeout || ctx.Err() != nil:
			return fmt.Errorf("mcptest: %s: %s", call.Tool, report.Error)
		}
	}
	return fmt.Errorf("mcptest: %s: timed out twice", call.Tool)
}

func structuredID(result *mcp.CallToolResult) string {
	m, _ := result.StructuredContent.(map[string]any)
	id, _ := m["id"].(string)
	return id
}

func resultText(result *mcp.CallToolResult) string {
	for _, c := range result.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return "isError with no text"
}
