package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServeWebhookFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "webhooks.json")
	if err := os.WriteFile(file, []byte(`{
	  "crm": {"effect_id": "contact.id", "signature": {"scheme": "hmac-sha256", "header": "X-CRM-Signature"}},
	  "sendgrid": {"provider": "mail-api", "events": "$", "effect_id": "sg_message_id"}
	}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := serveFlags([]string{"--webhook-map", file, "--webhook-secret", "stripe=whsec_abc", "--webhook-secret", "crm=s3cret",
		"--webhook-tolerance", "2m"})
	if err != nil {
		t.Fatal(err)
	}
	w := c.webhooks
	if got := strings.Join(w.Mappings.Names(), ","); got != "crm,mailgun,postmark,sendgrid,stripe" {
		t.Errorf("mappings: got %s, want the built-in ones and crm", got)
	}
	if w.Mappings["sendgrid"].Provider != "mail-api" {
		t.Errorf("sendgrid: got provider %q, want the file's mapping to override the preset", w.Mappings["sendgrid"].Provider)
	}
	if w.Secrets["stripe"] != "whsec_abc" || w.Secrets["crm"] != "s3cret" || w.Tolerance != 2*time.Minute {
		t.Errorf("got secrets %v and tolerance %s, want stripe's and crm's, 2m", w.Secrets, w.Tolerance)
	}

	t.Setenv("ONCETRACE_WEBHOOK_SECRETS", "stripe=whsec_env, mailgun=key-env")
	c, err = serveFlags([]string{"--webhook-tolerance", "0"})
	if err != nil {
		t.Fatal(err)
	}
	if c.webhooks.Secrets["stripe"] != "whsec_env" || c.webhooks.Secrets["mailgun"] != "key-env" || c.webhooks.Tolerance >= 0 {
		t.Errorf("from the environment: got %v, tolerance %s; want both secrets and no age check", c.webhooks.Secrets, c.webhooks.Tolerance)
	}
	t.Setenv("ONCETRACE_WEBHOOK_SECRETS", "")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--webhook-secret", "whsec_abc"}, "must be PROVIDER=SECRET"},
		{[]string{"--webhook-secret", "strip=whsec_abc"}, "no webhook mapping named strip; known: mailgun, postmark, sendgrid, stripe"},
		{[]string{"--webhook-secret", "sendgrid=not-a-key"}, "SendGrid verification key"},
		{[]string{"--webhook-map", file, "--webhook-secret", "sendgrid=x"}, "no signature scheme"},
		{[]string{"--webhook-map", filepath.Join(dir, "missing.json")}, "--webhook-map"},
	} {
		_, err := serveFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "whsec_abc") {
			t.Errorf("%v: the error %q shows the secret", tc.args, err)
		}
	}
}
