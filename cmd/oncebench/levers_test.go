package main

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// Every layout must store each event once: compare's requests sent twice
// (every request retried) leave as many rows as sent once, and every
// layout gives every body back byte for byte by its id.
func TestLeverLayoutsDedupeAndReadBack(t *testing.T) {
	bodies, _, _, err := compareRequestsWith(1000, 1, "protobuf", randomIDs)
	if err != nil {
		t.Fatal(err)
	}
	commits, events, err := leverCommits(bodies[0])
	if err != nil {
		t.Fatal(err)
	}
	var sent []logEvent
	for _, c := range commits {
		sent = append(sent, flatten(c)...)
	}
	for _, ev := range sent {
		// (b') drops the id column: the body must hold the id.
		if !bytes.Contains(ev.body, []byte(`"`+ev.id+`"`)) {
			t.Fatalf("event %s: body %s does not hold its id", ev.id, ev.body)
		}
	}
	retried := append(append([][][]logEvent{}, commits...), commits...)
	c := leversConfig{}
	c.syncName = "normal"
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	for i, l := range leverLayouts() {
		t.Run(l.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "levers.db")
			f, err := runLayout(context.Background(), c, l, path, retried)
			if err != nil {
				t.Fatal(err)
			}
			if f.events != events || f.bytes <= 0 {
				t.Fatalf("layout %d: got %d events stored in %d bytes, want %d events", i, f.events, f.bytes, events)
			}
			db, err := sql.Open("sqlite", rawDSN(path, c.sync))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, ev := range sent {
				got, err := bodyByID(context.Background(), db, l.shape, ev.id)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, ev.body) {
					t.Fatalf("event %s: got body %s, want %s", ev.id, got, ev.body)
				}
			}
		})
	}
}

// oncebench levers runs every layout and prints each against the
// baseline, then weighs the writer's tables.
func TestLeversSuiteRuns(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"levers", "-spans", "1000", "-rounds", "1", "-dir", t.TempDir()}, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, l := range leverLayouts() {
		if !strings.Contains(text, l.name) {
			t.Errorf("output has no line for %q:\n%s", l.name, text)
		}
	}
	if !strings.Contains(text, "spans rows by role: model 200, http 200") {
		t.Errorf("output has no count of the writer's spans rows by role (1,000 spans: 200 model, 200 HTTP):\n%s", text)
	}
	if !strings.Contains(text, "1.00     1.00       1.00    1.00") {
		t.Errorf("output has no baseline line of ratios 1.00:\n%s", text)
	}
}
