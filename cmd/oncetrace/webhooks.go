package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/webhook"
	"github.com/oncetrace/oncetrace/web"
)

// webhookFlags are serve's flags for POST /api/v1/webhooks/{provider}, as
// given; webhookConfig turns them into the server's configuration.
type webhookFlags struct {
	maps      []string // mapping files, in order: a later one overrides a name
	secrets   []string // NAME=SECRET
	tolerance time.Duration
	maxTokens int
}

func (w *webhookFlags) register(fs *flag.FlagSet) {
	if file := os.Getenv("ONCETRACE_WEBHOOK_MAP"); file != "" {
		w.maps = append(w.maps, file)
	}
	if env := os.Getenv("ONCETRACE_WEBHOOK_SECRETS"); env != "" {
		for s := range strings.SplitSeq(env, ",") {
			if s = strings.TrimSpace(s); s != "" {
				w.secrets = append(w.secrets, s)
			}
		}
	}
	fs.Func("webhook-map", "a JSON file of webhook mappings by provider name, added to the built-in stripe, sendgrid, postmark and mailgun "+
		"(a name given again overrides; repeatable; see docs/outbox.md) (env ONCETRACE_WEBHOOK_MAP)", func(v string) error {
		w.maps = append(w.maps, v)
		return nil
	})
	fs.Func("webhook-secret", "PROVIDER=SECRET: verify that provider's webhook signatures, and refuse unsigned deliveries, e.g. stripe=whsec_... "+
		"(repeatable; env ONCETRACE_WEBHOOK_SECRETS, comma-separated)", func(v string) error {
		w.secrets = append(w.secrets, v)
		return nil
	})
	fs.DurationVar(&w.tolerance, "webhook-tolerance", web.DefaultWebhookTolerance,
		"how old a signed webhook's timestamp may be (Stripe, SendGrid, Mailgun, a mapping's timestamp); 0 accepts any age")
	fs.IntVar(&w.maxTokens, "webhook-max-tokens", web.DefaultWebhookMaxTokens,
		"how many unexpired one-time tokens of signed webhooks (Mailgun's, a mapping's replay_token) the database remembers to refuse a replay; "+
			"at the limit a delivery with a new token is answered 503, retryable")
}

// config reads the mapping files and checks every secret against the
// scheme of the mapping it names, so that a typo fails at start-up rather
// than at the first delivery, and that no mapping without a secret records
// the effects of a provider whose webhooks must be signed.
func (w *webhookFlags) config() (web.WebhookConfig, error) {
	cfg := web.WebhookConfig{Mappings: webhook.Builtin(), Secrets: map[string]string{}, Tolerance: w.tolerance, MaxTokens: w.maxTokens}
	if w.tolerance <= 0 {
		cfg.Tolerance = -1 // any age; zero in web.WebhookConfig means the default
	}
	if w.maxTokens < 1 {
		return cfg, fmt.Errorf("serve: --webhook-max-tokens %d: must be at least 1", w.maxTokens)
	}
	origins := map[string]string{} // mapping name -> where it was defined, for messages
	for name := range cfg.Mappings {
		origins[name] = "the built-in mappings"
	}
	for _, file := range w.maps {
		data, err := os.ReadFile(file)
		if err != nil {
			return cfg, fmt.Errorf("serve: --webhook-map: %w", err)
		}
		ms, err := webhook.ParseMap(data)
		if err != nil {
			return cfg, fmt.Errorf("serve: --webhook-map %s: %w", file, err)
		}
		for name, m := range ms {
			cfg.Mappings[name] = m
			origins[name] = "--webhook-map " + file
		}
	}
	for _, s := range w.secrets {
		name, secret, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return cfg, fmt.Errorf("serve: --webhook-secret %q: must be PROVIDER=SECRET", redact(s))
		}
		m, known := cfg.Mappings[name]
		if !known {
			return cfg, fmt.Errorf("serve: --webhook-secret %s=...: no webhook mapping named %s; known: %s", name, name, strings.Join(cfg.Mappings.Names(), ", "))
		}
		if err := m.Signature.CheckSecret(secret); err != nil {
			return cfg, fmt.Errorf("serve: --webhook-secret %s=...: %w", name, err)
		}
		cfg.Secrets[name] = secret
	}
	if err := checkSignedProviders(cfg, origins); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// checkSignedProviders refuses a mapping that records the effects of a
// provider another mapping's secret makes signed, without a secret of its
// own: POST /api/v1/webhooks/<it> would record that provider's effects
// unsigned, around the signature check.
func checkSignedProviders(cfg web.WebhookConfig, origins map[string]string) error {
	signedBy := map[string]string{} // provider -> a mapping with a secret recording it
	for _, name := range cfg.Mappings.Names() {
		if _, signed := cfg.Secrets[name]; signed {
			if _, seen := signedBy[cfg.Mappings[name].Provider]; !seen {
				signedBy[cfg.Mappings[name].Provider] = name
			}
		}
	}
	for _, name := range cfg.Mappings.Names() {
		provider := cfg.Mappings[name].Provider
		by, mustSign := signedBy[provider]
		if _, signed := cfg.Secrets[name]; signed || !mustSign {
			continue
		}
		return fmt.Errorf("serve: %s: mapping %q records provider %q without checking a signature, but --webhook-secret %s=... makes %s's webhooks signed: "+
			"it would let unsigned %s effects in; give it a signature scheme and --webhook-secret %s=..., or another provider",
			origins[name], name, provider, by, provider, provider, name)
	}
	return nil
}

// redact keeps a secret out of an error message that quotes its flag.
func redact(s string) string {
	if len(s) <= 4 {
		return "..."
	}
	return s[:4] + "..."
}
