package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store"
)

// The outbox's search finds an email by the start of its recipient (any
// case), its Message-ID with or without <>, its key, its subject, its
// sender and plain words; the parts no index holds stop after
// MaxEffectScan rows and the cursor resumes the walk.
func TestEffectSearch(t *testing.T) {
	db, w := openDB(t)
	ctx := context.Background()
	start := time.Date(2026, 6, 30, 9, 0, 0, 0, time.UTC)
	mail := func(id, key, to, subject string, at time.Duration) map[string]any {
		return map[string]any{"type": "effect", "provider": "smtp", "effect_id": id, "idempotency_key": key, "target": to,
			"summary": "email to " + to + ", subject '" + subject + "'", "at": stamp(start.Add(at))}
	}
	write(t, w,
		mail("<inv-1@acme.dev>", "ik_invoice_1", "Jordan@Acme.dev", "Your June invoice", time.Second),
		mail("<inv-2@acme.dev>", "ik_invoice_2", "jordan@acme.dev", "Your June invoice", 2*time.Second),
		mail("<welcome@acme.dev>", "ik_welcome", "sam@globex.io", "Welcome aboard", 3*time.Second),
		map[string]any{"type": "effect", "provider": "stripe", "effect_id": "ch_1", "idempotency_key": "ik_charge", "target": "cus_42",
			"summary": "charge 20.00 EUR to cus_42", "at": stamp(start.Add(4 * time.Second))},
	)
	if err := db.PutMessage(ctx, store.Message{Provider: "smtp", EffectID: "<welcome@acme.dev>", From: "hello@globex.io",
		Recipients: []string{"sam@globex.io"}, ReceivedAt: start, Raw: []byte("Subject: Welcome aboard\r\n\r\nhi")}); err != nil {
		t.Fatal(err)
	}
	search := func(s store.EffectSearch, key string) []string {
		t.Helper()
		rows, _, err := db.Effects(ctx, store.EffectFilter{Search: s, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		return ids
	}
	cases := []struct {
		name   string
		search store.EffectSearch
		key    string
		want   []string
	}{
		{"to, any case", store.EffectSearch{To: "jordan@acme.DEV"}, "", []string{"<inv-1@acme.dev>", "<inv-2@acme.dev>"}},
		{"to, its start", store.EffectSearch{To: "sam"}, "", []string{"<welcome@acme.dev>"}},
		{"to, not its middle", store.EffectSearch{To: "acme"}, "", nil},
		{"message-id without <>", store.EffectSearch{MessageID: "inv-2@acme.dev"}, "", []string{"<inv-2@acme.dev>"}},
		{"message-id with <>", store.EffectSearch{MessageID: "<inv-1@acme.dev>"}, "", []string{"<inv-1@acme.dev>"}},
		{"key", store.EffectSearch{}, "ik_welcome", []string{"<welcome@acme.dev>"}},
		{"subject", store.EffectSearch{Subject: "june INVOICE"}, "", []string{"<inv-1@acme.dev>", "<inv-2@acme.dev>"}},
		{"subject is not the recipient", store.EffectSearch{Subject: "jordan"}, "", nil},
		{"from", store.EffectSearch{From: "globex"}, "", []string{"<welcome@acme.dev>"}},
		{"words, all of them", store.EffectSearch{Words: []string{"invoice", "inv-2"}}, "", []string{"<inv-2@acme.dev>"}},
		{"a word in a summary that is not an email", store.EffectSearch{Words: []string{"eur"}}, "", []string{"ch_1"}},
		{"to and subject", store.EffectSearch{To: "sam", Subject: "invoice"}, "", nil},
	}
	for _, c := range cases {
		if got := search(c.search, c.key); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// A search for what no index holds reads at most MaxEffectScan rows a
// page; its cursor resumes where the walk stopped, so that every match is
// reached page by page.
func TestEffectSearchScanIsBounded(t *testing.T) {
	db, w := openDB(t)
	ctx := context.Background()
	start := time.Date(2026, 6, 30, 9, 0, 0, 0, time.UTC)
	n := store.MaxEffectScan + 10
	events := make([]map[string]any, 0, n)
	for i := range n {
		subject := "receipt"
		if i == 3 || i == n-2 {
			subject = "needle"
		}
		events = append(events, map[string]any{"type": "effect", "provider": "smtp", "effect_id": fmt.Sprintf("m_%05d", i),
			"summary": "email to a@b.c, subject '" + subject + "'", "at": stamp(start.Add(time.Duration(i) * time.Millisecond))})
	}
	write(t, w, events...)
	var found []string
	cursor := ""
	pages := 0
	for {
		rows, next, err := db.Effects(ctx, store.EffectFilter{Search: store.EffectSearch{Subject: "needle"}, Limit: 10, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range rows {
			found = append(found, r.ID)
		}
		if next == "" {
			break
		}
		cursor = next
		if pages > 3 {
			t.Fatalf("search did not end after %d pages", pages)
		}
	}
	if want := []string{"m_00003", fmt.Sprintf("m_%05d", n-2)}; !slices.Equal(found, want) {
		t.Errorf("got %q, want %q", found, want)
	}
	if pages != 2 {
		t.Errorf("got %d pages, want 2: the first stops after %d rows read", pages, store.MaxEffectScan)
	}
}
