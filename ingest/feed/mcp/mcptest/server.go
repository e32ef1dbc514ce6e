package mcptest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools the server offers.
const (
	ToolSendInvoiceEmail = "send_invoice_email"
	ToolGetInvoice       = "get_invoice"
	ToolChargeCard       = "charge_card"
)

// Keys of params._meta that the harness reads and writes.
const (
	// MetaIdempotencyKey carries a call's idempotency key (shared design).
	MetaIdempotencyKey = "io.oncetrace/idempotency-key"
	// MetaFault asks a recording proxy to inject a fault into one call.
	MetaFault = "io.oncetrace/fault"
	// MetaTraceparent carries the W3C trace context (SEP-414).
	MetaTraceparent = "traceparent"
)

// ServerOptions configures NewServer. The zero value is a working server
// that counts nothing.
type ServerOptions struct {
	// Name is the server's serverInfo.name; DefaultServerName when empty.
	Name string
	// OnEffect, when set, is called once for every side effect the server
	// really makes, an email sent or a card charged, before the call is
	// answered; never for a replay of an idempotency key. It may be called
	// from several goroutines at once.
	OnEffect func(Effect)
	// OnCall, when set, is called for every tools/call the server receives,
	// before the tool runs, with what arrived on the wire.
	OnCall func(ToolCall)
	// LoseResponse, when set, is asked after each call's work is done
	// (tool is the tool's name, n counts that tool's calls from 1); true
	// holds the answer until the client gives up on the call, so that the
	// client times out as if the response were lost. The answer is sent
	// then, late, as a slow server's would: the SDK client ignores it, but
	// a proxy in front sees it after the client's notifications/cancelled.
	// (A recording proxy's own lose-response drops the answer instead.)
	// LoseFirst makes the usual one.
	LoseResponse func(tool string, n int) bool
	// HoldLimit bounds how long a lost response is held when the client
	// never gives up; 30 s when zero. The answer is sent after it.
	HoldLimit time.Duration
	// MailURL, when set, is the sandbox mail API's send URL
	// (.../sandbox/mail/v1/send): send_invoice_email POSTs the email there,
	// with the call's idempotency key and traceparent as headers, and the
	// sandbox decides whether it is sent or replayed. When empty the server
	// sends nothing and keeps its own keys.
	MailURL string
	// HTTPClient posts to MailURL; a client with a 10 s timeout when nil.
	HTTPClient *http.Client
	// Logger receives the SDK's server log; nothing is logged when nil.
	Logger *slog.Logger
}

// DefaultServerName is the server's serverInfo.name when none is given.
const DefaultServerName = "mcptest-invoices"

// Effect is one side effect the server really made.
type Effect struct {
	Tool           string `json:"tool"` // ToolSendInvoiceEmail or ToolChargeCard
	ID             string `json:"id"`   // msg_... or ch_..., the result's structuredContent.id
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Traceparent    string `json:"traceparent,omitempty"` // the call's params._meta.traceparent
}

// ToolCall is a tools/call as the server received it.
type ToolCall struct {
	Tool      string          `json:"tool"`
	N         int             `json:"n"` // this tool's calls, counted from 1
	Arguments json.RawMessage `json:"arguments"`
	Meta      map[string]any  `json:"meta,omitempty"`
}

// LoseFirst is a ServerOptions.LoseResponse that loses the answer to the
// first call of each tool named.
func LoseFirst(tools ...string) func(tool string, n int) bool {
	return func(tool string, n int) bool {
		for _, t := range tools {
			if t == tool && n == 1 {
				return true
			}
		}
		return false
	}
}

// Tool arguments and results. Their JSON shapes are the design note's.
type (
	SendInvoiceEmailArgs struct {
		To        string `json:"to" jsonschema:"the recipient's email address"`
		InvoiceID string `json:"invoice_id" jsonschema:"the invoice to send"`
	}
	SendInvoiceEmailResult struct {
		ID     string `json:"id"` // msg_...
		Status string `json:"status"`
	}
	GetInvoiceArgs struct {
		InvoiceID string `json:"invoice_id" jsonschema:"the invoice to read"`
	}
	Invoice struct {
		ID       string `json:"id"`
		Customer string `json:"customer"`
		Amount   int    `json:"amount"`
		Currency string `json:"currency"`
		Status   string `json:"status"`
	}
	ChargeCardArgs struct {
		Amount         int    `json:"amount" jsonschema:"the amount in cents"`
		Customer       string `json:"customer" jsonschema:"the customer to charge"`
		IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"the same key returns the same charge and charges once"`
	}
	ChargeCardResult struct {
		ID     string `json:"id"` // ch_...
		Amount int    `json:"amount"`
		Status string `json:"status"`
	}
)

// invoiceServer is the state behind the tools, shared by every session of
// one NewServer.
type invoiceServer struct {
	opts ServerOptions

	mu      sync.Mutex
	calls   map[string]int
	sent    map[string]keyed // idempotency key -> the email sent with it
	charges map[string]keyed // idempotency key -> the charge made with it
}

// keyed is what an idempotency key was first used for.
type keyed struct {
	args string // the arguments, canonical JSON
	id   string
}

// NewServer makes the design note's invoice server.
func NewServer(opts ServerOptions) *mcp.Server {
	if opts.Name == "" {
		opts.Name = DefaultServerName
	}
	if opts.HoldLimit <= 0 {
		opts.HoldLimit = 30 * time.Second
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	s := &invoiceServer{opts: opts, calls: map[string]int{}, sent: map[string]keyed{}, charges: map[string]keyed{}}
	server := mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: "1.0.0"}, &mcp.ServerOptions{Logger: opts.Logger})
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolSendInvoiceEmail,
		Description: "Send an invoice by email. Every call sends one, unless it repeats an idempotency key given in _meta.",
	}, handle(s, s.sendInvoiceEmail))
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolGetInvoice,
		Description: "Read an invoice.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, handle(s, s.getInvoice))
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolChargeCard,
		Description: "Charge a customer's card. The same idempotency key returns the same charge and charges once.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
	}, handle(s, s.chargeCard))
	return server
}

// handle wraps a tool's work with what every tool shares: OnCall, and
// LoseResponse after the work is done.
func handle[In, Out any](s *invoiceServer, work func(context.Context, In, mcp.Meta) (Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		tool := req.Params.Name
		s.mu.Lock()
		s.calls[tool]++
		n := s.calls[tool]
		s.mu.Unlock()
		if s.opts.OnCall != nil {
			s.opts.OnCall(ToolCall{Tool: tool, N: n, Arguments: req.Params.Arguments, Meta: req.Params.Meta})
		}
		out, err := work(ctx, in, req.Params.Meta)
		if err != nil || s.opts.LoseResponse == nil || !s.opts.LoseResponse(tool, n) {
			return nil, out, err
		}
		// The work is done; the client hears nothing until it gives up
		// (the SDK cancels ctx on notifications/cancelled or when the
		// session ends). The answer then goes out late, as a slow server's
		// would: the work was done, so it is the true one.
		hold := time.NewTimer(s.opts.HoldLimit)
		defer hold.Stop()
		select {
		case <-ctx.Done():
		case <-hold.C:
		}
		return nil, out, nil
	}
}

func (s *invoiceServer) sendInvoiceEmail(ctx context.Context, in SendInvoiceEmailArgs, meta mcp.Meta) (SendInvoiceEmailResult, error) {
	key, traceparent := metaString(meta, MetaIdempotencyKey), metaString(meta, MetaTraceparent)
	if s.opts.MailURL != "" {
		return s.sendThroughSandbox(ctx, in, key, traceparent)
	}
	id, fresh, err := s.claim(s.sent, key, in, "msg_")
	if err != nil {
		return SendInvoiceEmailResult{}, fmt.Errorf("mcptest: %s: %w", ToolSendInvoiceEmail, err)
	}
	if fresh {
		s.effect(Effect{Tool: ToolSendInvoiceEmail, ID: id, IdempotencyKey: key, Traceparent: traceparent})
	}
	return SendInvoiceEmailResult{ID: id, Status: "sent"}, nil
}

// sendThroughSandbox sends the email through the sandbox mail API, which
// keeps the idempotency keys.
func (s *invoiceServer) sendThroughSandbox(ctx context.Context, in SendInvoiceEmailArgs, key, traceparent string) (SendInvoiceEmailResult, error) {
	body, _ := json.Marshal(map[string]string{"to": in.To, "subject": "Invoice " + in.InvoiceID,
		"body": "Please find invoice " + in.InvoiceID + " attached."})
	// A client giving up does not stop a send under way, as with a real
	// server: the call's context is not the send's.
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, s.opts.MailURL, bytes.NewReader(body))
	if err != nil {
		return SendInvoiceEmailResult{}, fmt.Errorf("mcptest: %s: %w", ToolSendInvoiceEmail, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	resp, err := s.opts.HTTPClient.Do(req)
	if err != nil {
		return SendInvoiceEmailResult{}, fmt.Errorf("mcptest: %s: %w", ToolSendInvoiceEmail, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return SendInvoiceEmailResult{}, fmt.Errorf("mcptest: %s: reading the mail API's answer: %w", ToolSendInvoiceEmail, err)
	}
	if resp.StatusCode != http.StatusOK {
		return SendInvoiceEmailResult{}, fmt.Errorf("mcptest: %s: the mail API answered %d: %s", ToolSendInvoiceEmail, resp.StatusCode, raw)
	}
	var sent struct {
		ID           string `json:"id"`
		Deduplicated bool   `json:"deduplicated"`
	}
	if err := json.Unmarshal(raw, &sent); err != nil || sent.ID == "" {
		return SendInvoiceEmailResult{}, fmt.Errorf("mcptest: %s: the mail API answered no id: %s", ToolSendInvoiceEmail, raw)
	}
	if !sent.Deduplicated && resp.Header.Get("Idempotent-Replayed") != "true" {
		s.effect(Effect{Tool: ToolSendInvoiceEmail, ID: sent.ID, IdempotencyKey: key, Traceparent: traceparent})
	}
	return SendInvoiceEmailResult{ID: sent.ID, Status: "sent"}, nil
}

func (s *invoiceServer) getInvoice(_ context.Context, in GetInvoiceArgs, _ mcp.Meta) (Invoice, error) {
	return Invoice{ID: in.InvoiceID, Customer: DefaultCustomer, Amount: DefaultAmount, Currency: "eur", Status: "open"}, nil
}

func (s *invoiceServer) chargeCard(_ context.Context, in ChargeCardArgs, meta mcp.Meta) (ChargeCardResult, error) {
	// The argument is the charge API's own key; the _meta key stands in
	// when a client gives only that.
	key := in.IdempotencyKey
	if key == "" {
		key = metaString(meta, MetaIdempotencyKey)
	}
	args := in
	args.IdempotencyKey = ""
	id, fresh, err := s.claim(s.charges, key, args, "ch_")
	if err != nil {
		return ChargeCardResult{}, fmt.Errorf("mcptest: %s: %w", ToolChargeCard, err)
	}
	if fresh {
		s.effect(Effect{Tool: ToolChargeCard, ID: id, IdempotencyKey: key, Traceparent: metaString(meta, MetaTraceparent)})
	}
	return ChargeCardResult{ID: id, Amount: in.Amount, Status: "succeeded"}, nil
}

// errKeyReused is a key used again with other arguments, refused as
// Stripe refuses it.
var errKeyReused = errors.New("idempotency key reused with other arguments")

// claim returns the id of a new effect (fresh) or, for a key seen before
// with the same arguments, the id of the effect made with it.
func (s *invoiceServer) claim(byKey map[string]keyed, key string, args any, prefix string) (id string, fresh bool, err error) {
	canonical, _ := json.Marshal(args)
	s.mu.Lock()
	defer s.mu.Unlock()
	if key != "" {
		if k, ok := byKey[key]; ok {
			if k.args != string(canonical) {
				return "", false, errKeyReused
			}
			return k.id, false, nil
		}
	}
	id = prefix + randomHex(12)
	if key != "" {
		byKey[key] = keyed{args: string(canonical), id: id}
	}
	return id, true, nil
}

func (s *invoiceServer) effect(e Effect) {
	if s.opts.OnEffect != nil {
		s.opts.OnEffect(e)
	}
}

func metaString(meta mcp.Meta, key string) string {
	v, _ := meta[key].(string)
	return v
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// EffectLog collects the effects a server makes; its Record is a
// ServerOptions.OnEffect. It is safe for concurrent use.
type EffectLog struct {
	mu      sync.Mutex
	effects []Effect
}

// Record appends e.
func (l *EffectLog) Record(e Effect) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.effects = append(l.effects, e)
}

// Effects returns the effects recorded so far, in order.
func (l *EffectLog) Effects() []Effect {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Effect(nil), l.effects...)
}

// Count returns how many effects tool made.
func (l *EffectLog) Count(tool string) int {
	return CountEffects(l.Effects(), tool)
}

// CountEffects returns how many of effects tool made.
func CountEffects(effects []Effect, tool string) int {
	n := 0
	for _, e := range effects {
		if e.Tool == tool {
			n++
		}
	}
	return n
}
