package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeMap writes a --webhook-map file.
func writeMap(t *testing.T, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "map.json")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

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
		"--webhook-tolerance", "2m", "--webhook-max-tokens", "500"})
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
	if w.Secrets["stripe"] != "whsec_abc" || w.Secrets["crm"] != "s3cret" || w.Tolerance != 2*time.Minute || w.MaxTokens != 500 {
		t.Errorf("got secrets %v, tolerance %s, %d tokens; want stripe's and crm's, 2m, 500", w.Secrets, w.Tolerance, w.MaxTokens)
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
		{[]string{"--webhook-max-tokens", "0"}, "--webhook-max-tokens 0: must be at least 1"},
		// The file's sendgrid records mail-api unsigned, as the second file's mail does, signed.
		{[]string{"--webhook-map", file, "--webhook-map", writeMap(t, `{"mail": {"provider": "mail-api", "effect_id": "id",
		  "signature": {"scheme": "hmac-sha256", "header": "X-Sig"}}}`), "--webhook-secret", "mail=whsec_abc"},
			`mapping "sendgrid" records provider "mail-api" without checking a signature, but --webhook-secret mail=... makes mail-api's webhooks signed`},
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

// TestServeRefusesAnUnsignedAlias is issue 22's bypass of a signature
// check: with Stripe's secret configured, a --webhook-map entry naming
// provider "stripe" without a signature of its own would record Stripe
// effects unsigned. The real binary refuses to start, naming the file,
// the entry and the provider; the same entry is fine when stripe has no
// secret, or when it has its own.
func TestServeRefusesAnUnsignedAlias(t *testing.T) {
	alias := writeMap(t, `{"stripe-alias": {"provider": "stripe", "effect_id": "id"}}`)
	db := filepath.Join(t.TempDir(), "x.db")
	_, errOut, code := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--db", db, "--webhook-map", alias, "--webhook-secret", "stripe=whsec_abc")
	want := "--webhook-map " + alias + `: mapping "stripe-alias" records provider "stripe" without checking a signature, but --webhook-secret stripe=... makes stripe's webhooks signed`
	if code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("got exit %d, stderr %q; want exit 2 and %q", code, errOut, want)
	}
	if strings.Contains(errOut, "whsec_abc") {
		t.Errorf("stderr %q shows the secret", errOut)
	}

	signedAlias := writeMap(t, `{"stripe-alias": {"provider": "stripe", "effect_id": "id", "signature": {"scheme": "hmac-sha256", "header": "X-Sig"}}}`)
	for _, args := range [][]string{
		{"--webhook-map", alias},
		{"--webhook-map", signedAlias, "--webhook-secret", "stripe=whsec_abc", "--webhook-secret", "stripe-alias=s3cret"},
	} {
		if _, err := serveFlags(args); err != nil {
			t.Errorf("%v: got %v, want it accepted", args, err)
		}
	}
}
