package smtpsink

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/trace"
)

// Provider is the provider of every effect the sink records.
const Provider = "smtp"

// Feed names the sink in effect event ids (feed.EventID); a
// WriterRecorder for the sink takes it.
const Feed = "smtp"

// Headers a sender sets on a message to tie it to an intent: the key it
// was sent with, and the execution and step that sent it (as with the
// sandbox's HTTP headers) when it carries no trace context.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderExecution      = "X-Oncetrace-Execution"
	HeaderStep           = "X-Oncetrace-Step"
	HeaderTraceparent    = "Traceparent"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxMessageBytes = 10 << 20
	DefaultMaxRecipients   = 100
	DefaultMaxConnections  = 16
	DefaultTimeout         = time.Minute
	DefaultRecordTimeout   = 30 * time.Second
	DefaultIdleTimeout     = time.Minute
	DefaultSessionTimeout  = 5 * time.Minute
	DefaultAuthTimeout     = 10 * time.Second
)

// Limits RFC 5321 sets and the sink keeps.
const (
	// MaxLineBytes bounds a command line and a line of a message's data,
	// CRLF included: RFC 5321's 1,000 for text (§ 4.5.3.1.6), doubled as
	// go-smtp has it, since some clients do not wrap. A longer line is
	// refused for good (500), so a client does not send it again.
	MaxLineBytes = 2000
	// MaxPathBytes bounds a MAIL FROM or RCPT TO address (§ 4.5.3.1.3).
	MaxPathBytes = 256
)

// MessageStore keeps the messages received, for the UI. The sink, a feed,
// does not import the store: cmd/oncetrace hands it one that does.
type MessageStore interface {
	PutMessage(ctx context.Context, m Received) error
}

// Received is a message as the sink accepted it, under the effect it
// recorded.
type Received struct {
	Provider   string
	EffectID   string
	From       string   // the envelope sender (MAIL FROM)
	Recipients []string // the envelope recipients (RCPT TO)
	ReceivedAt time.Time
	Raw        []byte // the message as received, headers and body
}

// Config is what the sink needs; cmd/oncetrace fills it from flags.
type Config struct {
	// Recorder commits each message's effect; required.
	Recorder feed.Recorder
	// Messages keeps each message's content; nil keeps none.
	Messages MessageStore
	// Limits are the ingest limits the effect must meet, as any event.
	Limits ingest.Limits
	// Token, when set, must be given with AUTH PLAIN (as the password)
	// before a message is accepted. When empty, AUTH PLAIN is offered and
	// any credentials are accepted, so clients configured with some work.
	Token string
	// MaxMessageBytes bounds a message (552 beyond it, and advertised in
	// EHLO's SIZE). It also bounds what is kept.
	MaxMessageBytes int64
	// MaxRecipients bounds a message's RCPT TO commands (452 beyond it).
	MaxRecipients int
	// MaxConnections bounds open connections; one more is answered 421
	// and closed. With MaxMessageBytes it bounds the memory messages take.
	MaxConnections int
	// Timeout bounds the wait for each command, for one whole DATA
	// transfer and for a reply to be written. A client that sends NOOP
	// more often never meets it: the three deadlines below bound a
	// connection's hold on one of MaxConnections.
	Timeout time.Duration
	// IdleTimeout bounds the time a connection goes without delivering a
	// message, from connecting or from its last 250 after DATA: NOOP,
	// RSET, HELP, VRFY, EHLO, and MAIL or RCPT that lead to no accepted
	// message do not move it (421 when it passes). A message's data
	// transfer under way is bounded by Timeout instead.
	IdleTimeout time.Duration
	// SessionTimeout bounds a connection's whole life, messages or not
	// (421 at the first command after it); a data transfer under way
	// finishes first.
	SessionTimeout time.Duration
	// AuthTimeout, when Token is set, bounds the time from connecting to
	// a successful AUTH (421 when it passes), so that clients without the
	// token hold a connection only that long.
	AuthTimeout time.Duration
	// RecordTimeout bounds the wait to record a message before the client
	// is told to retry (451).
	RecordTimeout time.Duration
	// Domain is the name the server greets with.
	Domain string
	Logger *slog.Logger
	// Now is the clock of received times; time.Now when nil.
	Now func() time.Time
}

// Sink is the SMTP server.
type Sink struct {
	cfg    Config
	server *smtp.Server

	mu       sync.Mutex
	closed   bool
	ln       net.Listener
	inflight sync.WaitGroup // messages being recorded
}

// New builds a sink; Serve runs it.
func New(cfg Config) *Sink {
	if cfg.Limits == (ingest.Limits{}) {
		cfg.Limits = ingest.DefaultLimits
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = DefaultMaxRecipients
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.AuthTimeout <= 0 {
		cfg.AuthTimeout = DefaultAuthTimeout
	}
	if cfg.RecordTimeout <= 0 {
		cfg.RecordTimeout = DefaultRecordTimeout
	}
	if cfg.Domain == "" {
		cfg.Domain = "oncetrace"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sink{cfg: cfg}
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = cfg.Domain
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxRecipients = cfg.MaxRecipients
	srv.MaxLineLength = MaxLineBytes
	srv.ReadTimeout, srv.WriteTimeout = cfg.Timeout, cfg.Timeout
	// There is no TLS: like the HTTP API, the sink listens on loopback
	// unless told otherwise, where the token does not cross a network.
	srv.AllowInsecureAuth = true
	srv.EnableSMTPUTF8 = true // messages are kept as bytes; UTF-8 addresses are fine
	srv.ErrorLog = errorLog{cfg.Logger}
	s.server = srv
	return s
}

// Serve accepts connections on ln until Close; it returns nil then.
func (s *Sink) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.ln = ln
	s.mu.Unlock()
	deadlines := connDeadlines{idle: s.cfg.IdleTimeout, session: s.cfg.SessionTimeout, transfer: s.cfg.Timeout, now: time.Now}
	if s.cfg.Token != "" {
		deadlines.auth = s.cfg.AuthTimeout
	}
	err := s.server.Serve(&limitListener{Listener: ln, slots: make(chan struct{}, s.cfg.MaxConnections), deadline: deadlines})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return err
}

// Close stops accepting, closes every connection, and returns once the
// messages being recorded are (their clients may not hear the 250 and
// will send again, which records nothing new). A client cut off before
// its message was recorded was not answered, and sends it again.
func (s *Sink) Close() error {
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	err := s.server.Close() // the listener is closed already
	s.inflight.Wait()
	if errors.Is(err, smtp.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// begin counts a message in, unless the sink is closing.
func (s *Sink) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

var (
	errAuthRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0},
		Message: "Authentication required: AUTH PLAIN with the ingest token as the password"}
	errRetry = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0},
		Message: "The message could not be recorded now; try again later"}
	errClosing = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2},
		Message: "Shutting down; try again later"}
	errIncomplete = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 4, 2},
		Message: "The message's data did not arrive whole; nothing was recorded; send it again"}
	// go-smtp stops reading at a line over its limit and cannot find the
	// end of the data any more: the connection closes after this reply.
	errLineTooLong = &smtp.SMTPError{Code: 500, EnhancedCode: smtp.EnhancedCode{5, 5, 2},
		Message: fmt.Sprintf("Line too long: a line of the message is over %d bytes (RFC 5321 allows 1000); nothing was recorded; "+
			"wrap it or send the part base64 or quoted-printable", MaxLineBytes)}
)

func (s *Sink) newSession(c *smtp.Conn) (smtp.Session, error) {
	dc, _ := c.Conn().(*deadlineConn) // nil only if served without limitListener
	return &session{sink: s, conn: dc}, nil
}

// session is one connection's state: whether it authenticated, and the
// envelope of the message under way.
type session struct {
	sink   *Sink
	conn   *deadlineConn
	authed bool
	from   string
	rcpts  []string
}

func (ss *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(_, _, password string) error {
		token := ss.sink.cfg.Token
		if token != "" && subtle.ConstantTimeCompare([]byte(password), []byte(token)) != 1 {
			return smtp.ErrAuthFailed
		}
		ss.authed = true
		ss.conn.authenticated()
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.sink.cfg.Token != "" && !ss.authed {
		return errAuthRequired
	}
	if err := checkPath("MAIL FROM", from, smtp.EnhancedCode{5, 1, 7}); err != nil {
		return err
	}
	ss.from, ss.rcpts = from, nil
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := checkPath("RCPT TO", to, smtp.EnhancedCode{5, 1, 3}); err != nil {
		return err
	}
	ss.rcpts = append(ss.rcpts, to)
	return nil
}

// checkPath refuses for good (553) an address RFC 5321 does not allow
// (§ 4.1.2, RFC 6531 for UTF-8): a control character, even quoted, bytes
// that are not UTF-8, or more than MaxPathBytes. go-smtp checks the
// address's shape but passes any byte through, and an address becomes an
// effect's target and a line of the message page.
func checkPath(field, addr string, code smtp.EnhancedCode) error {
	refuse := func(format string, args ...any) error {
		return &smtp.SMTPError{Code: 553, EnhancedCode: code, Message: field + ": " + fmt.Sprintf(format, args...)}
	}
	if len(addr) > MaxPathBytes {
		return refuse("the address is %d bytes; RFC 5321 allows %d", len(addr), MaxPathBytes)
	}
	if !utf8.ValidString(addr) {
		return refuse("the address is not UTF-8")
	}
	for i, r := range addr {
		if unicode.IsControl(r) {
			return refuse("the address has a control character (%U at byte %d); RFC 5321 allows none", r, i)
		}
	}
	return nil
}

func (ss *session) Data(r io.Reader) error {
	ss.conn.transfer(true, false)
	err := ss.sink.receive(r, ss.from, ss.rcpts)
	ss.conn.transfer(false, err == nil)
	return err
}

func (ss *session) Reset()        { ss.from, ss.rcpts = "", nil }
func (ss *session) Logout() error { return nil }

// receive records one message: its effect first, committed, then its
// content. Only then does the client hear 250. What the sender got wrong
// is refused for good (5xx, naming the header); what failed here is
// refused for now (451), and sending it again records it once.
func (s *Sink) receive(r io.Reader, from string, rcpts []string) error {
	if !s.begin() {
		return errClosing
	}
	defer s.inflight.Done()
	raw, err := io.ReadAll(r) // bounded by MaxMessageBytes: 552 beyond it
	var refused *smtp.SMTPError
	if errors.As(err, &refused) {
		return refused
	}
	if errors.Is(err, smtp.ErrTooLongLine) {
		return errLineTooLong
	}
	if err != nil { // a timeout, a connection cut: nothing was recorded
		return errIncomplete
	}
	at := s.cfg.Now()
	section, _ := splitMessage(raw)
	fields, err := parseHeader(section)
	if err != nil {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Message header: " + err.Error()}
	}
	h := textproto.MIMEHeader{}
	for _, f := range fields {
		h.Add(textproto.CanonicalMIMEHeaderKey(f.Name), f.Value)
	}
	e := s.effect(h, raw, rcpts, at)
	if _, err := feed.EffectEvent(Feed, e, s.cfg.Limits); err != nil {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: headerProblem(err)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RecordTimeout)
	defer cancel()
	if err := s.cfg.Recorder.RecordEffect(ctx, e); err != nil {
		s.cfg.Logger.Error("smtp: cannot record a message's effect; the client is told to retry", "effect_id", e.ID, "err", err)
		return errRetry
	}
	if s.cfg.Messages != nil {
		m := Received{Provider: e.Provider, EffectID: e.ID, From: from, Recipients: rcpts, ReceivedAt: at, Raw: raw}
		if err := s.cfg.Messages.PutMessage(ctx, m); err != nil {
			s.cfg.Logger.Error("smtp: cannot keep a message; the client is told to retry", "effect_id", e.ID, "err", err)
			return errRetry
		}
	}
	s.cfg.Logger.Info("smtp: message recorded", "effect_id", e.ID, "to", e.Target, "bytes", len(raw),
		"execution_id", e.ExecutionID, "step_id", e.StepID, "trace_id", e.TraceID)
	return nil
}

// effect is the effect a message records.
func (s *Sink) effect(h textproto.MIMEHeader, raw []byte, rcpts []string, at time.Time) trace.Effect {
	e := trace.Effect{
		Provider:       Provider,
		ID:             messageID(h.Get("Message-Id"), raw, s.cfg.Limits.IDBytes),
		IdempotencyKey: strings.TrimSpace(h.Get(HeaderIdempotencyKey)),
		ExecutionID:    strings.TrimSpace(h.Get(HeaderExecution)),
		StepID:         strings.TrimSpace(h.Get(HeaderStep)),
		Target:         joinBounded(rcpts, s.cfg.Limits.TextBytes),
		At:             at,
	}
	e.TraceID, e.SpanID = feed.ParseTraceContext(h.Get(HeaderTraceparent))
	e.Fingerprint, e.Summary = ReadMessage(raw).fingerprint(rcpts)
	return e
}

// fingerprint is what a message asked for (feed.Mail): its envelope
// recipients (Bcc included, as delivered), its subject, and its text, HTML
// and attachments as decoded. What differs between two sends of one
// message (Message-ID, Date, MIME boundaries, transfer encodings, line
// endings) is not part of it.
func (m Message) fingerprint(rcpts []string) (fingerprint, summary string) {
	var body []string
	if m.HasText {
		body = append(body, "text:"+m.Text)
	}
	if m.HasHTML {
		body = append(body, "html:"+m.HTML)
	}
	for i, a := range m.Attachments {
		body = append(body, "attachment:"+a.Name+" "+a.ContentType+" sha256:"+m.attachmentDigests[i])
	}
	return feed.Mail{Recipients: rcpts, Subject: m.Get("Subject"), Body: body}.Fingerprint()
}

// messageID is a message's effect id: its Message-ID as sent; a hash of
// the whole message when it has none, so that the same bytes sent again
// are one effect; a hash of the Message-ID when it is too long or not
// printable to be an id, so that it still names one effect.
func messageID(v string, raw []byte, maxBytes int) string {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		sum := sha256.Sum256(raw)
		return "sha256:" + hex.EncodeToString(sum[:16])
	case len(v) > maxBytes || !printable(v):
		sum := sha256.Sum256([]byte(v))
		return "message-id-sha256:" + hex.EncodeToString(sum[:16])
	}
	return v
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// joinBounded joins the recipients with ", " in at most max bytes, saying
// how many it left out.
func joinBounded(addrs []string, max int) string {
	all := strings.Join(addrs, ", ")
	if len(all) <= max {
		return all
	}
	budget := max - len(" and 1000000000 more")
	var b strings.Builder
	for i, a := range addrs {
		sep := ""
		if i > 0 {
			sep = ", "
		}
		if b.Len()+len(sep)+len(a) > budget {
			fmt.Fprintf(&b, " and %d more", len(addrs)-i)
			break
		}
		b.WriteString(sep + a)
	}
	return b.String()
}

// headerProblem names the header behind an effect field the ingest
// checks refused ("idempotency_key: must be ..." → "Idempotency-Key
// header: must be ...").
func headerProblem(err error) string {
	msg := err.Error()
	for field, header := range map[string]string{"idempotency_key": HeaderIdempotencyKey, "execution_id": HeaderExecution,
		"step_id": HeaderStep, "effect_id": "Message-ID", "target": "RCPT TO"} {
		if rest, ok := strings.CutPrefix(msg, field+":"); ok {
			return header + ":" + rest
		}
	}
	return msg
}

// errorLog sends go-smtp's log lines to the server's logger.
type errorLog struct{ l *slog.Logger }

func (e errorLog) Printf(format string, v ...any) { e.l.Warn("smtp: " + fmt.Sprintf(format, v...)) }
func (e errorLog) Println(v ...any) {
	e.l.Warn("smtp: " + strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}
