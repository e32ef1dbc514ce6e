package trace

import "testing"

func TestParseTraceparent(t *testing.T) {
	tests := []struct {
		header, traceID, spanID string
		ok                      bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true},
		{" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "", "", false},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", "", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", "", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "", "", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "", "", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		traceID, spanID, ok := ParseTraceparent(tt.header)
		if traceID != tt.traceID || spanID != tt.spanID || ok != tt.ok {
			t.Errorf("ParseTraceparent(%q) = %q, %q, %v; want %q, %q, %v", tt.header, traceID, spanID, ok, tt.traceID, tt.spanID, tt.ok)
		}
	}
}
