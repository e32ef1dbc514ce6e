package feed

import (
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

func TestTraceContextFromStrings(t *testing.T) {
	for _, tc := range []struct {
		name, traceID, spanID string
		wantT, wantS          string
	}{
		{"lower case", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
		{"upper case", "4BF92F3577B34DA6A3CE929D0E0E4736", "00F067AA0BA902B7", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
		{"all zeros", strings.Repeat("0", 32), "00f067aa0ba902b7", "", ""},
		{"short", "4bf92f35", "00f067aa0ba902b7", "", ""},
		{"a dash inside", "4bf92f3577b34da6a3ce929d0e0e-736", "00f067aa0ba902b7", "", ""},
	} {
		if tr, sp := TraceIDs(tc.traceID, tc.spanID); tr != tc.wantT || sp != tc.wantS {
			t.Errorf("TraceIDs, %s: got %q %q, want %q %q", tc.name, tr, sp, tc.wantT, tc.wantS)
		}
	}
	if tr, sp := ParseTraceContext(" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 "); tr != "4bf92f3577b34da6a3ce929d0e0e4736" || sp != "00f067aa0ba902b7" {
		t.Errorf("ParseTraceContext: got %q %q", tr, sp)
	}
}

// An effect id as long as the id limit allows still gets an event id
// within the limit, the same one each time.
func TestEffectEventOfALongID(t *testing.T) {
	e := trace.Effect{Provider: "postmark", ID: strings.Repeat("m", ingest.DefaultLimits.IDBytes)}
	a, err := EffectEvent("webhook", e, ingest.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := EffectEvent("webhook", e, ingest.DefaultLimits)
	if len(a.ID) > ingest.DefaultLimits.IDBytes || a.ID != b.ID || !strings.HasPrefix(a.ID, "webhook:") {
		t.Errorf("got event ids %q and %q, want one id within the limit", a.ID, b.ID)
	}
	short, _ := EffectEvent("webhook", trace.Effect{Provider: "postmark", ID: "m1"}, ingest.DefaultLimits)
	if short.ID != "webhook:postmark:m1" {
		t.Errorf("a short id: got event id %q, want webhook:postmark:m1", short.ID)
	}
}
