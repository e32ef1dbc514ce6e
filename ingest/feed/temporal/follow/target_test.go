package follow

import (
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in, hostPort, namespace, err string
	}{
		{in: "127.0.0.1:7233", hostPort: "127.0.0.1:7233", namespace: "default"},
		{in: "temporal.example:7233/billing", hostPort: "temporal.example:7233", namespace: "billing"},
		{in: "[::1]:7233/x", hostPort: "[::1]:7233", namespace: "x"},
		{in: "127.0.0.1:7233/", err: "namespace after / is empty"},
		{in: "127.0.0.1", err: "want HOST:PORT[/NAMESPACE]"},
		{in: ":7233", err: "host is empty"},
		{in: "h:0", err: "not a number from 1 to 65535"},
		{in: "h:http", err: "not a number from 1 to 65535"},
		{in: "h:7233/a/b", err: "contains a slash"},
		{in: "h:7233/" + strings.Repeat("n", 256), err: "namespace of 256 bytes, over the limit of 255"},
	} {
		got, err := ParseTarget(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseTarget(%q): got error %v, want one saying %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ParseTarget(%q): %v", tc.in, err)
		case tc.err == "" && (got.HostPort != tc.hostPort || got.Namespace != tc.namespace):
			t.Errorf("ParseTarget(%q): got %q and %q, want %q and %q", tc.in, got.HostPort, got.Namespace, tc.hostPort, tc.namespace)
		}
	}
}
