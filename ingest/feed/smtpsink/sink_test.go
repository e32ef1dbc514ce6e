package smtpsink_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/smtp"
	"net/textproto"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/smtpsink"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// sinkServer is a sink on a loopback port, recording through a real
// writer into a real SQLite file.
type sinkServer struct {
	addr string
	db   *store.DB
}

// storedMessages keeps the sink's messages in the database, as serve's
// own adapter does (the sink does not import the store).
type storedMessages struct{ db *store.DB }

func (s storedMessages) PutMessage(ctx context.Context, m smtpsink.Received) error {
	return s.db.PutMessage(ctx, store.Message{Provider: m.Provider, EffectID: m.EffectID, From: m.From,
		Recipients: m.Recipients, ReceivedAt: m.ReceivedAt, Raw: m.Raw})
}

func startSink(t *testing.T, cfg smtpsink.Config) *sinkServer {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	recorder := feed.WriterRecorder{Writer: w, Limits: ingest.DefaultLimits, Feed: smtpsink.Feed}
	if r, ok := cfg.Recorder.(*flakyRecorder); ok {
		r.next = recorder
	} else {
		cfg.Recorder = recorder
	}
	cfg.Messages = storedMessages{db}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := smtpsink.New(cfg)
	served := make(chan error, 1)
	go func() { served <- sink.Serve(ln) }()
	t.Cleanup(func() {
		if err := sink.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: got %v, want nil after Close", err)
		}
		w.Close()
		db.Close()
	})
	return &sinkServer{addr: ln.Addr().String(), db: db}
}

func (s *sinkServer) effects(t *testing.T) []trace.Effect {
	t.Helper()
	rows, _, err := s.db.Effects(context.Background(), store.EffectFilter{Provider: smtpsink.Provider})
	if err != nil {
		t.Fatal(err)
	}
	var out []trace.Effect
	for _, r := range rows {
		out = append(out, r.Effect)
	}
	return out
}

// smtpCode is the reply code of a net/smtp error, or 0.
func smtpCode(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

// mail is a message with the given header lines and a text body.
func mail(header ...string) string {
	return strings.Join(append(header, "", "Hello Jordan,", "your June invoice is attached.", ""), "\r\n")
}

const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID  = "00f067aa0ba902b7"
)

// TestSinkRecordsAMessageAsAnEffect: a message sent with the standard
// library's client is one effect of provider smtp with what its envelope
// and header say, committed before the 250, and its content is kept.
func TestSinkRecordsAMessageAsAnEffect(t *testing.T) {
	s := startSink(t, smtpsink.Config{})
	msg := mail("From: Billing <billing@acme.dev>", "To: jordan@acme.dev", "Subject: Your June invoice",
		"Message-ID: <inv-june@agent.acme.dev>", "Idempotency-Key: ik_a94a0b1d",
		"traceparent: 00-"+testTraceID+"-"+testSpanID+"-01",
		"X-Oncetrace-Execution: exec_x", "X-Oncetrace-Step: step-4")
	if err := smtp.SendMail(s.addr, nil, "billing@acme.dev", []string{"jordan@acme.dev", "ap@acme.dev"}, []byte(msg)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	// SendMail returned after the 250: the effect is there already.
	got := s.effects(t)
	if len(got) != 1 {
		t.Fatalf("effects: got %d, want 1: %+v", len(got), got)
	}
	e := got[0]
	want := trace.Effect{Provider: "smtp", ID: "<inv-june@agent.acme.dev>", IdempotencyKey: "ik_a94a0b1d", ExecutionID: "exec_x",
		StepID: "step-4", Target: "jordan@acme.dev, ap@acme.dev", TraceID: testTraceID, SpanID: testSpanID}
	at := e.At
	e.At = time.Time{}
	if e.Provider != want.Provider || e.ID != want.ID || e.IdempotencyKey != want.IdempotencyKey || e.ExecutionID != want.ExecutionID ||
		e.StepID != want.StepID || e.Target != want.Target || e.TraceID != want.TraceID || e.SpanID != want.SpanID {
		t.Errorf("effect: got %+v, want %+v", e, want)
	}
	if time.Since(at) > time.Minute || at.After(time.Now()) {
		t.Errorf("effect at: got %v, want the time it was received", at)
	}
	m, err := s.db.Message(context.Background(), "smtp", "<inv-june@agent.acme.dev>")
	if err != nil {
		t.Fatalf("Message: %v", err)
	}
	if m.From != "billing@acme.dev" || strings.Join(m.Recipients, ",") != "jordan@acme.dev,ap@acme.dev" || m.Received != 1 ||
		!strings.Contains(string(m.Raw), "Subject: Your June invoice\r\n") {
		t.Errorf("message kept: got from %q to %q received %d raw %q, want the envelope, one copy and the raw message",
			m.From, m.Recipients, m.Received, m.Raw)
	}
	if m.Effect.ExecutionID != "exec_x" || m.Effect.StepID != "step-4" {
		t.Errorf("message's effect: got %+v, want exec_x step-4", m.Effect)
	}
}

// TestSinkSameMessageIDIsOneEffect: the same Message-ID sent twice (a
// client retrying after a lost 250) is one effect; the copy is counted.
func TestSinkSameMessageIDIsOneEffect(t *testing.T) {
	s := startSink(t, smtpsink.Config{})
	for i := range 2 {
		msg := mail("From: billing@acme.dev", "To: jordan@acme.dev", "Subject: try "+string(rune('1'+i)), "Message-ID: <same@agent>")
		if err := smtp.SendMail(s.addr, nil, "billing@acme.dev", []string{"jordan@acme.dev"}, []byte(msg)); err != nil {
			t.Fatalf("SendMail %d: %v", i+1, err)
		}
	}
	if got := s.effects(t); len(got) != 1 || got[0].ID != "<same@agent>" {
		t.Errorf("effects: got %+v, want one, <same@agent>", got)
	}
	m, err := s.db.Message(context.Background(), "smtp", "<same@agent>")
	if err != nil {
		t.Fatal(err)
	}
	if m.Received != 2 || !strings.Contains(string(m.Raw), "Subject: try 1") {
		t.Errorf("message: got received %d, raw %q; want 2 copies counted and the first kept", m.Received, m.Raw)
	}
}

// TestSinkMessageWithoutMessageID: a message without a Message-ID is
// named by a hash of its bytes: the same bytes again are one effect, other
// bytes another.
func TestSinkMessageWithoutMessageID(t *testing.T) {
	s := startSink(t, smtpsink.Config{})
	first := mail("From: billing@acme.dev", "To: jordan@acme.dev", "Subject: no id")
	for _, msg := range []string{first, first, mail("From: billing@acme.dev", "To: jordan@acme.dev", "Subject: no id, again")} {
		if err := smtp.SendMail(s.addr, nil, "billing@acme.dev", []string{"jordan@acme.dev"}, []byte(msg)); err != nil {
			t.Fatalf("SendMail: %v", err)
		}
	}
	got := s.effects(t)
	if len(got) != 2 {
		t.Fatalf("effects: got %d (%+v), want 2: the identical re-send is the same effect", len(got), got)
	}
	for _, e := range got {
		if !strings.HasPrefix(e.ID, "sha256:") || len(e.ID) != len("sha256:")+32 {
			t.Errorf("effect id without a Message-ID: got %q, want sha256:<32 hex>", e.ID)
		}
	}
}

// TestSinkSizeLimit: a message over the limit is refused with 552 and
// records nothing; the limit is advertised.
func TestSinkSizeLimit(t *testing.T) {
	s := startSink(t, smtpsink.Config{MaxMessageBytes: 1024})
	c, err := smtp.Dial(s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("agent.test"); err != nil {
		t.Fatal(err)
	}
	if ok, size := c.Extension("SIZE"); !ok || size != "1024" {
		t.Errorf("EHLO: got SIZE %v %q, want 1024", ok, size)
	}
	big := mail("From: billing@acme.dev", "To: jordan@acme.dev", "Message-ID: <big@agent>") + strings.Repeat(strings.Repeat("x", 76)+"\r\n", 60)
	err = smtp.SendMail(s.addr, nil, "billing@acme.dev", []string{"jordan@acme.dev"}, []byte(big))
	if code := smtpCode(err); code != 552 {
		t.Errorf("a 4 KiB message over a 1 KiB limit: got %v (code %d), want 552", err, code)
	}
	if got := s.effects(t); len(got) != 0 {
		t.Errorf("effects after a refused message: got %+v, want none", got)
	}
	if _, err := s.db.Message(context.Background(), "smtp", "<big@agent>"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("message kept after 552: got %v, want not found", err)
	}
}

// TestSinkRecipientLimit: a recipient beyond the limit is refused with 452.
func TestSinkRecipientLimit(t *testing.T) {
	s := startSink(t, smtpsink.Config{MaxRecipients: 2})
	err := smtp.SendMail(s.addr, nil, "billing@acme.dev", []string{"a@acme.dev", "b@acme.dev", "c@acme.dev"}, []byte(mail("Subject: three")))
	if code := smtpCode(err); code != 452 {
		t.Errorf("a third recipient over a limit of 2: got %v (code %d), want 452", err, code)
	}
}

// TestSinkAuth: with a token, a message needs AUTH PLAIN with it (530
// without, 535 with a wrong one); without one, any credentials and none
// are accepted.
func TestSinkAuth(t *testing.T) {
	msg := []byte(mail("Subject: auth", "Message-ID: <auth@agent>"))
	to := []string{"jordan@acme.dev"}
	s := startSink(t, smtpsink.Config{Token: "s3cret"})
	if code := smtpCode(smtp.SendMail(s.addr, nil, "a@acme.dev", to, msg)); code != 530 {
		t.Errorf("no AUTH with a token set: got code %d, want 530", code)
	}
	wrong := smtp.PlainAuth("", "agent", "guess", "127.0.0.1")
	if code := smtpCode(smtp.SendMail(s.addr, wrong, "a@acme.dev", to, msg)); code != 535 {
		t.Errorf("AUTH PLAIN with a wrong token: got code %d, want 535", code)
	}
	if got := s.effects(t); len(got) != 0 {
		t.Fatalf("effects before a good AUTH: got %+v, want none", got)
	}
	right := smtp.PlainAuth("", "agent", "s3cret", "127.0.0.1")
	if err := smtp.SendMail(s.addr, right, "a@acme.dev", to, msg); err != nil {
		t.Errorf("AUTH PLAIN with the token: %v", err)
	}
	if got := s.effects(t); len(got) != 1 {
		t.Errorf("effects after a good AUTH: got %d, want 1", len(got))
	}

	open := startSink(t, smtpsink.Config{})
	if err := smtp.SendMail(open.addr, nil, "a@acme.dev", to, msg); err != nil {
		t.Errorf("no token, no AUTH: %v", err)
	}
	if err := smtp.SendMail(open.addr, smtp.PlainAuth("", "any", "thing", "127.0.0.1"), "a@acme.dev", to, msg); err != nil {
		t.Errorf("no token, any credentials: %v", err)
	}
}

// flakyRecorder fails its first calls, then records through next.
type flakyRecorder struct {
	failures atomic.Int32
	next     feed.Recorder
}

func (r *flakyRecorder) RecordEffect(ctx context.Context, e trace.Effect) error {
	if r.failures.Add(-1) >= 0 {
		return writer.ErrOverloaded
	}
	return r.next.RecordEffect(ctx, e)
}

// TestSinkRecordFailureIsTransient: when the effect cannot be recorded the
// client hears 451 (try again) and nothing is kept; the retry records it.
func TestSinkRecordFailureIsTransient(t *testing.T) {
	r := &flakyRecorder{}
	r.failures.Store(1)
	s := startSink(t, smtpsink.Config{Recorder: r})
	msg := []byte(mail("Subject: retry", "Message-ID: <retry@agent>"))
	err := smtp.SendMail(s.addr, nil, "a@acme.dev", []string{"jordan@acme.dev"}, msg)
	if code := smtpCode(err); code != 451 {
		t.Fatalf("a message the writer could not take: got %v (code %d), want 451", err, code)
	}
	if _, err := s.db.Message(context.Background(), "smtp", "<retry@agent>"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("message kept after 451: got %v, want not found", err)
	}
	if err := smtp.SendMail(s.addr, nil, "a@acme.dev", []string{"jordan@acme.dev"}, msg); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if got := s.effects(t); len(got) != 1 {
		t.Errorf("effects after the retry: got %d, want 1", len(got))
	}
}

// TestSinkRefusesWhatTheSenderGotWrong: a header that cannot be an effect
// field, or a header section that is not one, is refused for good (550),
// naming it.
func TestSinkRefusesWhatTheSenderGotWrong(t *testing.T) {
	s := startSink(t, smtpsink.Config{})
	tests := []struct {
		name, msg, want string
	}{
		{"key too long", mail("Subject: k", "Idempotency-Key: "+strings.Repeat("k", 300)), "Idempotency-Key"},
		{"step too long", mail("Subject: s", "X-Oncetrace-Step: "+strings.Repeat("s", 300)), "X-Oncetrace-Step"},
		{"malformed header", "Subject: ok\r\nthis line has no colon\r\n\r\nbody\r\n", "header"},
	}
	for _, tt := range tests {
		err := smtp.SendMail(s.addr, nil, "a@acme.dev", []string{"jordan@acme.dev"}, []byte(tt.msg))
		if code := smtpCode(err); code != 550 || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v (code %d), want 550 naming %s", tt.name, err, code, tt.want)
		}
	}
	if got := s.effects(t); len(got) != 0 {
		t.Errorf("effects: got %+v, want none", got)
	}
}

// TestSinkLongMessageIDIsHashed: a Message-ID too long to be an id still
// names one effect.
func TestSinkLongMessageIDIsHashed(t *testing.T) {
	s := startSink(t, smtpsink.Config{})
	msg := []byte(mail("Subject: long id", "Message-ID: <"+strings.Repeat("m", 300)+"@agent>"))
	for range 2 {
		if err := smtp.SendMail(s.addr, nil, "a@acme.dev", []string{"jordan@acme.dev"}, msg); err != nil {
			t.Fatal(err)
		}
	}
	got := s.effects(t)
	if len(got) != 1 || !strings.HasPrefix(got[0].ID, "message-id-sha256:") {
		t.Errorf("effects: got %+v, want one named message-id-sha256:…", got)
	}
}

// TestSinkConnectionLimit: a connection beyond the limit hears 421 and is
// closed; the one within it works.
func TestSinkConnectionLimit(t *testing.T) {
	s := startSink(t, smtpsink.Config{MaxConnections: 1})
	held, err := smtp.Dial(s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := held.Hello("agent.test"); err != nil {
		t.Fatal(err)
	}
	extra, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(extra).ReadString('\n')
	if !strings.HasPrefix(line, "421 ") {
		t.Errorf("a second connection over a limit of 1: got %q, want 421", line)
	}
	if err := held.Noop(); err != nil {
		t.Errorf("the connection within the limit: %v", err)
	}
}

// TestSinkCloseDoesNotWaitForIdleClients: Close returns at once though a
// client holds a connection open.
func TestSinkCloseDoesNotWaitForIdleClients(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := smtpsink.New(smtpsink.Config{Recorder: &flakyRecorder{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	served := make(chan error, 1)
	go func() { served <- sink.Serve(ln) }()
	c, err := smtp.Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if err := sink.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: got %v, want nil", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close with an idle client: took %v, want at once", d)
	}
}

// TestSinkSlowDataIsTransient: a message whose data stops arriving for
// longer than the timeout records nothing and is answered 451 (send it
// again), not a permanent failure.
func TestSinkSlowDataIsTransient(t *testing.T) {
	s := startSink(t, smtpsink.Config{Timeout: 300 * time.Millisecond})
	conn, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	text := textproto.NewConn(conn)
	expect := func(code int) string {
		t.Helper()
		_, msg, err := text.ReadResponse(code)
		if err != nil {
			t.Fatalf("want %d: %v", code, err)
		}
		return msg
	}
	expect(220)
	for _, step := range []struct {
		cmd  string
		code int
	}{{"EHLO agent.test", 250}, {"MAIL FROM:<a@acme.dev>", 250}, {"RCPT TO:<jordan@acme.dev>", 250}, {"DATA", 354}} {
		if err := text.PrintfLine("%s", step.cmd); err != nil {
			t.Fatal(err)
		}
		expect(step.code)
	}
	text.PrintfLine("Subject: slow\r\nMessage-ID: <slow@agent>\r\n\r\nthe first line, and then nothing")
	// The data stops; the sink gives up after its timeout.
	if _, msg, err := text.ReadResponse(451); err != nil || !strings.Contains(msg, "did not arrive whole") {
		t.Errorf("a message whose data stopped: got %q %v, want 451", msg, err)
	}
	if got := s.effects(t); len(got) != 0 {
		t.Errorf("effects: got %+v, want none", got)
	}
}

// multipartMail is an invoice as a mail library sends it: a new Message-ID,
// Date and boundary on every send, text and HTML, and a PDF attached.
func multipartMail(boundary, messageID, key, pdf string) string {
	return strings.Join([]string{
		"From: Billing <billing@acme.dev>", "To: Jordan <jordan@acme.dev>", "Subject: =?UTF-8?Q?Your_June_invoice?=",
		"Message-ID: " + messageID, "Date: " + time.Now().Format(time.RFC1123Z), "Idempotency-Key: " + key,
		"MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="` + boundary + `"`, "",
		"--" + boundary, `Content-Type: text/plain; charset=utf-8`, "Content-Transfer-Encoding: quoted-printable", "",
		"Hello Jordan, your June invoice is attached.", "",
		"--" + boundary, `Content-Type: text/html; charset=utf-8`, "", "<p>Hello Jordan, your June invoice is attached.</p>", "",
		"--" + boundary, `Content-Type: application/pdf; name="invoice.pdf"`, "Content-Transfer-Encoding: base64",
		`Content-Disposition: attachment; filename="invoice.pdf"`, "", base64.StdEncoding.EncodeToString([]byte(pdf)), "",
		"--" + boundary + "--", "",
	}, "\r\n")
}

// TestSinkFingerprint: two sends of one invoice by a client that makes a
// new Message-ID, Date, boundary and key each time are two effects with one
// fingerprint; another attachment or another recipient is another one.
func TestSinkFingerprint(t *testing.T) {
	s := startSink(t, smtpsink.Config{})
	send := func(rcpts []string, msg string) {
		t.Helper()
		if err := smtp.SendMail(s.addr, nil, "billing@acme.dev", rcpts, []byte(msg)); err != nil {
			t.Fatalf("SendMail: %v", err)
		}
	}
	send([]string{"jordan@acme.dev", "ap@acme.dev"}, multipartMail("b1", "<m1@agent>", "ik_1", "%PDF-1.7 June"))
	send([]string{"AP@acme.dev", "Jordan@Acme.dev"}, multipartMail("other-boundary", "<m2@agent>", "ik_2", "%PDF-1.7 June"))
	send([]string{"jordan@acme.dev", "ap@acme.dev"}, multipartMail("b1", "<m3@agent>", "ik_3", "%PDF-1.7 July"))
	send([]string{"jordan@acme.dev"}, multipartMail("b1", "<m4@agent>", "ik_4", "%PDF-1.7 June"))
	fp := map[string]string{}
	for _, e := range s.effects(t) {
		if !strings.HasPrefix(e.Fingerprint, "mail:") {
			t.Fatalf("effect %s: got fingerprint %q, want mail:...", e.ID, e.Fingerprint)
		}
		fp[e.ID] = e.Fingerprint
		if e.ID == "<m1@agent>" {
			if want := "email to ap@acme.dev, jordan@acme.dev, subject 'Your June invoice'"; e.Summary != want {
				t.Errorf("summary: got %q, want %q", e.Summary, want)
			}
		}
	}
	if len(fp) != 4 {
		t.Fatalf("effects: got %d, want 4", len(fp))
	}
	if fp["<m1@agent>"] != fp["<m2@agent>"] {
		t.Errorf("one invoice sent twice: got fingerprints %s and %s, want one", fp["<m1@agent>"], fp["<m2@agent>"])
	}
	if fp["<m3@agent>"] == fp["<m1@agent>"] || fp["<m4@agent>"] == fp["<m1@agent>"] || fp["<m3@agent>"] == fp["<m4@agent>"] {
		t.Errorf("another attachment, another recipient: got fingerprints %v, want each its own", fp)
	}
}

// smtpConn is a raw SMTP conversation, for what net/smtp will not send.
type smtpConn struct {
	t    *testing.T
	text *textproto.Conn
}

// dialSMTP connects and reads the greeting; the whole conversation has a
// deadline.
func dialSMTP(t *testing.T, addr string) *smtpConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	c := &smtpConn{t: t, text: textproto.NewConn(conn)}
	if code, msg := c.reply(); code != 220 {
		t.Fatalf("greeting: got %d %s, want 220", code, msg)
	}
	return c
}

// reply reads one reply, whatever its code; 0 when the connection ended.
func (c *smtpConn) reply() (int, string) {
	code, msg, err := c.text.ReadResponse(0)
	var te *textproto.Error
	if err != nil && !errors.As(err, &te) {
		return 0, err.Error()
	}
	return code, msg
}

// send writes one line and reads its reply.
func (c *smtpConn) send(line string) (int, string) {
	c.t.Helper()
	if err := c.text.PrintfLine("%s", line); err != nil {
		return 0, err.Error()
	}
	return c.reply()
}

// expect sends each line and fails unless it is answered code.
func (c *smtpConn) expect(code int, lines ...string) {
	c.t.Helper()
	for _, line := range lines {
		if got, msg := c.send(line); got != code {
			c.t.Fatalf("%.40q: got %d %s, want %d", line, got, msg, code)
		}
	}
}

// TestSinkRefusesOverLongLinesForGood: a command line or a line of data
// over MaxLineBytes is answered 5xx, which no client retries, not 451;
// nothing is recorded. A line at the limit is accepted.
func TestSinkRefusesOverLongLinesForGood(t *testing.T) {
	s := startSink(t, smtpsink.Config{})
	atLimit := strings.Repeat("a", smtpsink.MaxLineBytes-2) // and CRLF
	c := dialSMTP(t, s.addr)
	c.expect(250, "EHLO agent.test", "MAIL FROM:<a@acme.dev>", "RCPT TO:<jordan@acme.dev>")
	c.expect(354, "DATA")
	c.text.PrintfLine("Subject: at the limit\r\nMessage-ID: <at-limit@agent>\r\n\r\n%s\r\n.", atLimit)
	if code, msg := c.reply(); code != 250 {
		t.Fatalf("a data line of %d bytes with CRLF: got %d %s, want 250", smtpsink.MaxLineBytes, code, msg)
	}

	tests := []struct {
		name string
		data bool // the line is in the message's data, not a command
	}{
		{"command", false},
		{"data", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialSMTP(t, s.addr)
			c.expect(250, "EHLO agent.test")
			var code int
			var msg string
			if tt.data {
				c.expect(250, "MAIL FROM:<a@acme.dev>", "RCPT TO:<jordan@acme.dev>")
				c.expect(354, "DATA")
				c.text.PrintfLine("Subject: too long\r\nMessage-ID: <too-long@agent>\r\n\r\n%sa\r\n.", atLimit)
				code, msg = c.reply()
			} else {
				code, msg = c.send("RCPT TO:<" + atLimit + "@acme.dev>")
			}
			if code < 500 || code > 599 {
				t.Errorf("a line of %d bytes: got %d %s, want a permanent 5xx", smtpsink.MaxLineBytes+1, code, msg)
			}
			if !strings.Contains(strings.ToLower(msg), "too long") {
				t.Errorf("a line of %d bytes: got %q, want the reply to say the line is too long", smtpsink.MaxLineBytes+1, msg)
			}
		})
	}
	if got := s.effects(t); len(got) != 1 || got[0].ID != "<at-limit@agent>" {
		t.Errorf("effects: got %+v, want only <at-limit@agent>", got)
	}
}

// TestSinkRefusesBadAddresses: an address RFC 5321 does not allow is
// refused for good (553), naming the command, and records nothing.
func TestSinkRefusesBadAddresses(t *testing.T) {
	s := startSink(t, smtpsink.Config{})
	tests := []struct {
		name, mail, rcpt, want string
	}{
		{"NUL in RCPT TO", "<a@acme.dev>", "<jordan\x00@acme.dev>", "RCPT TO"},
		{"SOH in RCPT TO", "<a@acme.dev>", "<jordan@acme\x01.dev>", "RCPT TO"},
		{"NUL quoted in RCPT TO", "<a@acme.dev>", "<\"jor\x00dan\"@acme.dev>", "RCPT TO"},
		{"DEL in RCPT TO", "<a@acme.dev>", "<jordan\x7f@acme.dev>", "RCPT TO"},
		{"C1 control in RCPT TO", "<a@acme.dev>", "<jordan\u0085@acme.dev>", "RCPT TO"},
		{"not UTF-8 in RCPT TO", "<a@acme.dev>", "<jordan\xff@acme.dev>", "RCPT TO"},
		{"path too long in RCPT TO", "<a@acme.dev>", "<" + strings.Repeat("j", smtpsink.MaxPathBytes) + "@acme.dev>", "RCPT TO"},
		{"NUL in MAIL FROM", "<a\x00@acme.dev>", "", "MAIL FROM"},
		{"ESC in MAIL FROM", "<a\x1b@acme.dev>", "", "MAIL FROM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialSMTP(t, s.addr)
			c.expect(250, "EHLO agent.test")
			code, msg := c.send("MAIL FROM:" + tt.mail)
			if tt.rcpt != "" {
				if code != 250 {
					t.Fatalf("MAIL FROM:%s: got %d %s, want 250", tt.mail, code, msg)
				}
				code, msg = c.send("RCPT TO:" + tt.rcpt)
			}
			if code != 553 || !strings.Contains(msg, tt.want) {
				t.Errorf("got %d %q, want 553 naming %s", code, msg, tt.want)
			}
			if code, _ := c.send("DATA"); code == 354 {
				t.Errorf("DATA after the refusal: got 354, want it refused with no recipient")
			}
		})
	}
	if got := s.effects(t); len(got) != 0 {
		t.Errorf("effects: got %+v, want none", got)
	}
	// A UTF-8 address (RFC 6531) and a quoted local part with a space pass.
	c := dialSMTP(t, s.addr)
	c.expect(250, "EHLO agent.test", "MAIL FROM:<a@acme.dev> SMTPUTF8", "RCPT TO:<jördan@acmé.dev>", `RCPT TO:<"jordan smith"@acme.dev>`)
}

// noopUntilClosed sends NOOP every interval until a reply is not 250,
// and returns that reply.
func (c *smtpConn) noopUntilClosed(interval time.Duration) (int, string) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for range tick.C {
		if err := c.text.PrintfLine("NOOP"); err != nil {
			return 0, err.Error()
		}
		if code, msg := c.reply(); code != 250 {
			return code, msg
		}
	}
	panic("unreachable")
}

// TestSinkNoopLoopsCannotHoldEverySlot: clients that fill every slot and
// send NOOP more often than any timeout are closed with 421 once they have
// delivered nothing for the idle timeout, and a sender then gets in.
func TestSinkNoopLoopsCannotHoldEverySlot(t *testing.T) {
	const slots, idle = 4, 300 * time.Millisecond
	s := startSink(t, smtpsink.Config{MaxConnections: slots, IdleTimeout: idle})
	testDeadline := time.Now().Add(8 * time.Second)
	closed := make(chan string, slots)
	for range slots {
		c := dialSMTP(t, s.addr)
		c.expect(250, "EHLO agent.test")
		go func() {
			code, msg := c.noopUntilClosed(idle / 3)
			closed <- fmt.Sprint(code, " ", msg)
		}()
	}
	// Every slot is held: one more connection is turned away.
	if _, err := smtp.Dial(s.addr); smtpCode(err) != 421 {
		t.Fatalf("a connection beyond %d held slots: got %v, want 421", slots, err)
	}
	for range slots {
		select {
		case reply := <-closed:
			if !strings.HasPrefix(reply, "421 ") || !strings.Contains(reply, "idle timeout") {
				t.Errorf("a NOOP loop's last reply: got %q, want 421 naming the idle timeout", reply)
			}
		case <-time.After(time.Until(testDeadline)):
			t.Fatalf("NOOP loops: got them still connected at the test's deadline, want them closed after the idle timeout of %v", idle)
		}
	}
	// A slot frees once go-smtp has closed the connection: poll for it.
	msg := []byte(mail("Subject: let in", "Message-ID: <let-in@agent>"))
	for {
		err := smtp.SendMail(s.addr, nil, "a@acme.dev", []string{"jordan@acme.dev"}, msg)
		if err == nil {
			break
		}
		if smtpCode(err) != 421 || time.Now().After(testDeadline) {
			t.Fatalf("a sender after the NOOP loops were closed: %v", err)
		}
	}
	if got := s.effects(t); len(got) != 1 || got[0].ID != "<let-in@agent>" {
		t.Errorf("effects: got %+v, want <let-in@agent>", got)
	}
}

// TestSinkDeadlines: a connection must deliver a message within the idle
// timeout (RSET, repeated EHLO, VRFY, MAIL and RCPT do not count), live at
// most the session timeout, and, with a token, AUTH within the auth
// timeout; each ends with a 421 naming it. A delivered message restarts
// the idle timeout.
func TestSinkDeadlines(t *testing.T) {
	const short, long = 300 * time.Millisecond, 5 * time.Second
	auth := "AUTH PLAIN " + base64.StdEncoding.EncodeToString([]byte("\x00agent\x00s3cret"))
	tests := []struct {
		name  string
		cfg   smtpsink.Config
		setup []string
		loop  []string // sent over and over, each must be answered 2xx, until the connection ends
		want  string
		lasts time.Duration // at least
	}{
		{"idle: RSET, EHLO, VRFY, MAIL and RCPT without a message", smtpsink.Config{IdleTimeout: short, SessionTimeout: long},
			nil, []string{"RSET", "EHLO agent.test", "VRFY jordan", "MAIL FROM:<a@acme.dev>", "RCPT TO:<jordan@acme.dev>", "RSET"}, "idle timeout", short},
		{"session: a message delivered every turn restarts the idle timeout", smtpsink.Config{IdleTimeout: short, SessionTimeout: 2 * short},
			nil, []string{"MAIL FROM:<a@acme.dev>", "RCPT TO:<jordan@acme.dev>", "DATA", "Subject: again\r\n\r\nhello\r\n."}, "session timeout", 2 * short},
		{"auth: a token set and no AUTH", smtpsink.Config{Token: "s3cret", IdleTimeout: long, SessionTimeout: long, AuthTimeout: short},
			nil, []string{"NOOP"}, "auth timeout", short},
		{"idle after AUTH: the auth deadline is lifted, not the idle one", smtpsink.Config{Token: "s3cret", IdleTimeout: 2 * short, SessionTimeout: long, AuthTimeout: short},
			[]string{auth}, []string{"NOOP"}, "idle timeout", 2 * short},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startSink(t, tt.cfg)
			start := time.Now() // before the sink's own start of the connection
			c := dialSMTP(t, s.addr)
			c.expect(250, "EHLO agent.test")
			for _, line := range tt.setup {
				if code, msg := c.send(line); code/100 != 2 {
					t.Fatalf("%s: got %d %s, want 2xx", line, code, msg)
				}
			}
			var code int
			var msg string
		loop:
			for {
				for _, line := range tt.loop {
					if code, msg = c.send(line); code/100 != 2 && code != 354 {
						break loop
					}
				}
			}
			lasted := time.Since(start)
			if code != 421 || !strings.Contains(msg, tt.want) {
				t.Errorf("the last reply: got %d %q, want 421 naming the %s", code, msg, tt.want)
			}
			if lasted < tt.lasts {
				t.Errorf("the connection lasted %v, want at least %v", lasted, tt.lasts)
			}
			if code, msg := c.reply(); code != 0 {
				t.Errorf("after the 421: got %d %s, want the connection closed", code, msg)
			}
		})
	}
}

// TestSinkSlowDataOutlivesTheIdleTimeout: a message's data that takes
// longer than the idle timeout to arrive, though within --smtp-timeout, is
// accepted: the idle timeout counts what a client does between messages.
func TestSinkSlowDataOutlivesTheIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	s := startSink(t, smtpsink.Config{IdleTimeout: idle, Timeout: 5 * time.Second})
	c := dialSMTP(t, s.addr)
	c.expect(250, "EHLO agent.test", "MAIL FROM:<a@acme.dev>", "RCPT TO:<jordan@acme.dev>")
	c.expect(354, "DATA")
	start := time.Now()
	tick := time.NewTicker(idle / 2)
	defer tick.Stop()
	c.text.PrintfLine("Subject: slow but steady\r\nMessage-ID: <steady@agent>\r\n")
	for i := range 5 {
		<-tick.C
		c.text.PrintfLine("line %d", i)
	}
	if code, msg := c.send("."); code != 250 {
		t.Fatalf("data over %v, within the timeout: got %d %s, want 250", time.Since(start), code, msg)
	}
	if got := s.effects(t); len(got) != 1 {
		t.Errorf("effects: got %d, want 1", len(got))
	}
}

// TestSinkSlowBDATIsBoundedAsAWhole: go-smtp's timeout is per BDAT
// command, so chunks sent more often would never meet it; the sink bounds
// the whole transfer by it, and records nothing.
func TestSinkSlowBDATIsBoundedAsAWhole(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := startSink(t, smtpsink.Config{Timeout: timeout, IdleTimeout: 10 * time.Second})
	c := dialSMTP(t, s.addr)
	c.expect(250, "EHLO agent.test", "MAIL FROM:<a@acme.dev>", "RCPT TO:<jordan@acme.dev>")
	start := time.Now()
	tick := time.NewTicker(timeout / 4)
	defer tick.Stop()
	chunk := "Subject: slow chunks\r\nMessage-ID: <bdat@agent>\r\n" // and the CRLF send adds
	var code int
	var msg string
	for range tick.C {
		if code, msg = c.send(fmt.Sprintf("BDAT %d\r\n%s", len(chunk)+len("\r\n"), chunk)); code != 250 {
			break
		}
		chunk = "one more line"
	}
	if code != 421 || time.Since(start) < timeout {
		t.Errorf("BDAT chunks every %v: got %d %q after %v, want 421 after %v", timeout/4, code, msg, time.Since(start), timeout)
	}
	if got := s.effects(t); len(got) != 0 {
		t.Errorf("effects: got %+v, want none", got)
	}
}
