package main

import (
	"fmt"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServeSMTPFlags(t *testing.T) {
	c, err := serveFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.smtpAddr != "" || c.smtp.MaxMessageBytes != 10<<20 || c.smtp.MaxRecipients != 100 || c.smtp.MaxConnections != 16 || c.smtp.Timeout != time.Minute ||
		c.smtp.IdleTimeout != time.Minute || c.smtp.SessionTimeout != 5*time.Minute || c.smtp.AuthTimeout != 10*time.Second {
		t.Errorf("defaults: got addr %q, %+v; want no sink, 10 MiB, 100 recipients, 16 connections, 1m, idle 1m, session 5m, auth 10s", c.smtpAddr, c.smtp)
	}
	c, err = serveFlags([]string{"--smtp", "127.0.0.1:2525", "--smtp-max-bytes", "1024", "--smtp-max-recipients", "5",
		"--smtp-max-connections", "2", "--smtp-timeout", "10s", "--smtp-idle-timeout", "20s", "--smtp-session-timeout", "30s", "--smtp-auth-timeout", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.smtpAddr != "127.0.0.1:2525" || c.smtp.MaxMessageBytes != 1024 || c.smtp.MaxRecipients != 5 || c.smtp.MaxConnections != 2 || c.smtp.Timeout != 10*time.Second ||
		c.smtp.IdleTimeout != 20*time.Second || c.smtp.SessionTimeout != 30*time.Second || c.smtp.AuthTimeout != 2*time.Second {
		t.Errorf("flags: got addr %q, %+v", c.smtpAddr, c.smtp)
	}
	t.Setenv("ONCETRACE_SMTP_ADDR", "localhost:2526")
	if c, err = serveFlags(nil); err != nil || c.smtpAddr != "localhost:2526" {
		t.Errorf("from the environment: got %q, %v; want localhost:2526", c.smtpAddr, err)
	}
	// The sink takes mail, which writes effects: the same exposure rule.
	if _, err := serveFlags([]string{"--smtp", "0.0.0.0:2525"}); err == nil || !strings.Contains(err.Error(), "--ingest-token") {
		t.Errorf("--smtp on every interface without a token: got %v, want a refusal naming --ingest-token", err)
	}
	if _, err := serveFlags([]string{"--smtp", "0.0.0.0:2525", "--ingest-token", "t"}); err != nil {
		t.Errorf("--smtp on every interface with a token: %v", err)
	}
}

// TestServeSMTP runs serve --smtp with an ingest token: a message needs
// AUTH PLAIN with the token, becomes an effect and a message page, and
// serve stops cleanly on SIGTERM with an idle SMTP client still connected.
func TestServeSMTP(t *testing.T) {
	smtpAddr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	s := startDemoServer(t, filepath.Join(t.TempDir(), "smtp.db"), "smtp.log", "--smtp", smtpAddr, "--ingest-token", "s3cret")
	msg := []byte("From: billing@acme.dev\r\nTo: jordan@acme.dev\r\nSubject: Your June invoice\r\nMessage-ID: <june@agent>\r\n" +
		"X-Oncetrace-Execution: exec_smtp\r\nX-Oncetrace-Step: step-4\r\n\r\nHello Jordan.\r\n")
	if err := smtp.SendMail(smtpAddr, nil, "billing@acme.dev", []string{"jordan@acme.dev"}, msg); err == nil || !strings.Contains(err.Error(), "530") {
		t.Errorf("a message without AUTH: got %v, want 530", err)
	}
	if err := smtp.SendMail(smtpAddr, smtp.PlainAuth("", "agent", "s3cret", "127.0.0.1"), "billing@acme.dev", []string{"jordan@acme.dev"}, msg); err != nil {
		t.Fatalf("a message with AUTH PLAIN and the token: %v\n%s", err, s.logText())
	}
	var effects struct {
		Effects []struct {
			EffectID    string `json:"effect_id"`
			ExecutionID string `json:"execution_id"`
		} `json:"effects"`
	}
	getJSON(t, s.url+"/api/v1/effects?provider=smtp", &effects)
	if len(effects.Effects) != 1 || effects.Effects[0].EffectID != "<june@agent>" || effects.Effects[0].ExecutionID != "exec_smtp" {
		t.Errorf("smtp effects: got %+v, want <june@agent> of exec_smtp", effects.Effects)
	}
	resp, err := demoHTTP.Get(s.url + "/outbox/messages?" + url.Values{"provider": {"smtp"}, "id": {"<june@agent>"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the message page: got %d, want 200", resp.StatusCode)
	}

	idle, err := smtp.Dial(smtpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	start := time.Now()
	s.stop(t)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("SIGTERM with an idle SMTP client: serve took %v to stop, want it not to wait for the client", d)
	}
}

// TestServeSMTPNoopLoops runs serve with four SMTP slots and a 300ms idle
// timeout: four clients that send NOOP every 100ms, without AUTH, hold
// every slot, are closed with 421 once the idle timeout passes, and a
// sender with the token then gets in and delivers.
func TestServeSMTPNoopLoops(t *testing.T) {
	const slots = 4
	smtpAddr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	s := startDemoServer(t, filepath.Join(t.TempDir(), "smtp.db"), "smtp.log", "--smtp", smtpAddr, "--ingest-token", "s3cret",
		"--smtp-max-connections", fmt.Sprint(slots), "--smtp-idle-timeout", "300ms")
	testDeadline := time.Now().Add(10 * time.Second)
	closed := make(chan string, slots)
	for range slots {
		conn, err := net.DialTimeout("tcp", smtpAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(testDeadline)
		text := textproto.NewConn(conn)
		if _, _, err := text.ReadResponse(220); err != nil {
			t.Fatalf("greeting: %v", err)
		}
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for range tick.C {
				if err := text.PrintfLine("NOOP"); err != nil {
					closed <- err.Error()
					return
				}
				if code, msg, err := text.ReadResponse(250); err != nil {
					closed <- fmt.Sprint(code, " ", msg, " ", err)
					return
				}
			}
		}()
	}
	if _, err := smtp.Dial(smtpAddr); err == nil || !strings.Contains(err.Error(), "421") {
		t.Fatalf("a connection beyond %d held slots: got %v, want 421", slots, err)
	}
	for range slots {
		select {
		case reply := <-closed:
			if !strings.HasPrefix(reply, "421 ") || !strings.Contains(reply, "idle timeout") {
				t.Errorf("a NOOP loop's last reply: got %q, want 421 naming the idle timeout", reply)
			}
		case <-time.After(time.Until(testDeadline)):
			t.Fatalf("NOOP loops: got them still connected at the test's deadline, want them closed after 300ms\n%s", s.logText())
		}
	}
	msg := []byte("Subject: let in\r\nMessage-ID: <let-in@agent>\r\n\r\nHello.\r\n")
	auth := smtp.PlainAuth("", "agent", "s3cret", "127.0.0.1")
	for {
		err := smtp.SendMail(smtpAddr, auth, "billing@acme.dev", []string{"jordan@acme.dev"}, msg)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "421") || time.Now().After(testDeadline) {
			t.Fatalf("a sender after the NOOP loops were closed: %v\n%s", err, s.logText())
		}
	}
	var effects struct {
		Effects []struct {
			EffectID string `json:"effect_id"`
		} `json:"effects"`
	}
	getJSON(t, s.url+"/api/v1/effects?provider=smtp", &effects)
	if len(effects.Effects) != 1 || effects.Effects[0].EffectID != "<let-in@agent>" {
		t.Errorf("smtp effects: got %+v, want <let-in@agent>", effects.Effects)
	}
}
