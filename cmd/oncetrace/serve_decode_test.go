package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The decode flags reach the server: a mistaken budget is refused at
// start, and the shape and OTLP limits given are the ones applied.
func TestServeDecodeFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"a budget below four bodies", []string{"--max-decode-bytes", "1000000"}, "", "--max-decode-bytes 1000000 is less than 8 × --max-body-bytes"},
		{"a budget of nothing", []string{"--max-decode-bytes", "0"}, "", "want a number of bytes above 0"},
		{"a budget from the environment", nil, "ONCETRACE_MAX_DECODE_BYTES=lots", `ONCETRACE_MAX_DECODE_BYTES="lots"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, cliBinary, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", t.TempDir() + "/x.db"}, tc.args...)...)
			cmd.Env = cliEnv()
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if err == nil || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("serve %v: got %v, %q; want a refusal naming %q", tc.args, err, out.String(), tc.want)
			}
		})
	}

	srv := startMemServer(t, "--max-spans", "2", "--max-json-depth", "2", "--max-json-elements", "3", "--max-decode-bytes", "68000000")
	ans := srv.post(t, "/v1/traces", "application/x-protobuf", "", otlpSpans(3))
	if ans.status != 413 || !strings.Contains(ans.body, "more than the limit of 2 spans") {
		t.Errorf("3 spans with --max-spans 2: got %d %q, want 413 naming the limit of 2", ans.status, ans.body)
	}
	for _, c := range []struct{ args, want string }{
		{`{"a":[[1]]}`, "args.a[0]: nested deeper than the limit of 2 levels"},
		{`[1,2,3,4]`, "args: array longer than the limit of 3 elements"},
	} {
		ans = srv.post(t, "/api/v1/events", "application/json", "", []byte(`{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"args":`+c.args+`}`))
		if ans.status != 400 || !strings.Contains(ans.body, c.want) {
			t.Errorf("args %s: got %d %q, want 400 naming %q", c.args, ans.status, ans.body, c.want)
		}
	}
	logs, _ := os.ReadFile(srv.logs)
	if !strings.Contains(string(logs), "max_decode_bytes=68000000") || !strings.Contains(string(logs), "gomemlimit=") {
		t.Errorf("start-up log: got %q, want the decode budget and the Go memory limit said", logs)
	}
}
