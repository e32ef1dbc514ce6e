package trace_test

import (
	"testing"

	"github.com/oncetrace/oncetrace/trace"
)

func TestNormaliseWorker(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"5139@vm@", "vm:5139"},
		{"12@host-a.example.com@", "host-a.example.com:12"},
		{"vm:5139", "vm:5139"},
		{"worker-1", "worker-1"},
		{"5139@vm", "5139@vm"}, // not the default shape
		{"x1@vm@", "x1@vm@"},   // not a pid
		{"@vm@", "@vm@"},       // no pid
		{"1@@", "1@@"},         // no host
		{"1@a@b@", "1@a@b@"},   // a host with an @
		{"", ""},
	} {
		if got := trace.NormaliseWorker(tc.in); got != tc.want {
			t.Errorf("NormaliseWorker(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
