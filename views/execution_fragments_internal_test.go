package views

import "testing"

// TestParseDomIDRoundTrip checks that a link to an id off the page finds
// what domID wrote, for ids with the characters ingest accepts.
func TestParseDomIDRoundTrip(t *testing.T) {
	for _, parts := range [][]string{{"step-14", "2"}, {"billing/2026-06;run=3", "1"}, {"mail-api", "msg_ä#1"}, {""}} {
		prefix, got, ok := parseDomID(domID("a", parts...))
		if !ok || prefix != "a" || len(got) != len(parts) {
			t.Fatalf("parseDomID(domID(a, %q)): got %q %q %v, want a and the parts", parts, prefix, got, ok)
		}
		for i := range parts {
			if got[i] != parts[i] {
				t.Errorf("part %d: got %q, want %q", i, got[i], parts[i])
			}
		}
	}
	lt := linkTargets{executionID: "x", rendered: map[string]bool{AttemptAnchor("step-1", 1): true}}
	for _, tc := range []struct{ href, want string }{
		{"#" + AttemptAnchor("step-1", 1), "#" + AttemptAnchor("step-1", 1)},
		{"#" + AttemptAnchor("step-2", 3), AttemptURL("x", "step-2", 3)},
		{"#" + EffectAnchor("mail-api", "m/1"), EffectURL("x", "mail-api", "m/1")},
		{"#" + domID("lane", "step-9"), LaneURL("x", "step-9")},
		{"#timeline-title", "#timeline-title"},
		{"/keys/k", "/keys/k"},
	} {
		if got := lt.href(tc.href); got != tc.want {
			t.Errorf("href(%q): got %q, want %q", tc.href, got, tc.want)
		}
	}
}
