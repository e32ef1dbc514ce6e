package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// TestIncidentSentenceOnDemo runs the real demo (`oncetrace demo`, agent
// processes, the sandbox mail API, a real crash) against a real `oncetrace
// serve`, and checks that the incident sentences the JSON twin gives are
// the ones the execution page shows, in the shape views' tests assert
// exactly; the marks reach the attempt and effect details.
func TestIncidentSentenceOnDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo's agent processes")
	}
	srv := startOncetraceServe(t)
	bin := filepath.Join(t.TempDir(), "oncetrace")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/oncetrace/oncetrace/cmd/oncetrace").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/oncetrace: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "demo", "--server", srv.url, "--run", "incident",
		"--scenario", "naive,crash,key-only", "--journal-dir", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("oncetrace demo: %v\n%s", err, out)
	}

	// Times and ids differ from run to run; the words do not.
	msg := `msg_[0-9a-f]{3}…[0-9a-f]{5}`
	for _, tc := range []struct {
		scenario string
		want     []string // patterns, one sentence each
		rule     string
		culprits []int
		labels   []string
	}{
		{"naive", []string{`^2 emails to jordan@acme\.dev from step-1 \(send_invoice_email\): sandbox-mail delivered ` + msg + ` at \+[0-9.]+ m?s, ` +
			`attempt 1 timed out at \+1(\.\d+)? s without seeing it, attempt 2 sent it again without an idempotency key: ` + msg + ` at \+1(\.\d+)? s\.$`},
			"duplicate_effect", []int{2}, []string{"1 of 2 · original", "2 of 2 · extra"}},
		{"crash", []string{`^2 emails to jordan@acme\.dev from step-1 \(send_invoice_email\): sandbox-mail delivered ` + msg + ` at \+[0-9.]+ m?s, ` +
			`attempt 1 on pid-\d+ never finished, then [0-9.]+ s passed with no process running, and attempt 2 on pid-\d+ sent it again without an idempotency key: ` + msg + ` at \+[0-9.]+ s\.$`},
			"duplicate_effect", []int{2}, []string{"1 of 2 · original", "2 of 2 · extra"}},
		{"key-only", []string{
			`^1 email to jordan@acme\.dev from step-1 \(send_invoice_email\): sandbox-mail delivered ` + msg + ` at \+[0-9.]+ m?s, ` +
				`attempt 1 on pid-\d+ ended ok at \+[0-9.]+ m?s, attempt 2 on pid-\d+ sent it again with the same key ik_[0-9a-f]{4}…[0-9a-f]{5}, ` +
				`and sandbox-mail answered from its idempotency store without sending again\.$`,
			`^1 effect for INV-2026-06 from step-2 \(record_in_crm\): crm recorded crm_INV…[0-9a-f]{5} at \+[0-9.]+ m?s, ` +
				`attempt 1 on pid-\d+ ended ok at \+[0-9.]+ m?s, attempt 2 on pid-\d+ was replayed from the journal without calling the tool\.$`},
			"", []int{}, []string{"", ""}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			id := "demo-" + tc.scenario + "-incident"
			var twin struct {
				Incidents []struct {
					Sentence string `json:"sentence"`
					Rule     string `json:"rule"`
					StepID   string `json:"step_id"`
					Culprits []int  `json:"culprits"`
					Effects  []struct {
						Provider string `json:"provider"`
						ID       string `json:"effect_id"`
						Label    string `json:"label"`
					} `json:"effects"`
				} `json:"incidents"`
			}
			if err := json.Unmarshal(getBody(t, srv.url+"/api/v1/executions/"+id), &twin); err != nil {
				t.Fatal(err)
			}
			if len(twin.Incidents) != len(tc.want) {
				t.Fatalf("incidents: got %+v, want %d", twin.Incidents, len(tc.want))
			}
			page := parseHTML(t, getBody(t, srv.url+"/executions/"+id))
			shown := testIDTexts(page, "incident-sentence")
			for i, in := range twin.Incidents {
				if !regexp.MustCompile(tc.want[i]).MatchString(in.Sentence) {
					t.Errorf("sentence %d: got %q, want it to match %q", i, in.Sentence, tc.want[i])
				}
				if !slices.Contains(shown, in.Sentence) {
					t.Errorf("page: got sentences %q, want %q among them", shown, in.Sentence)
				}
			}
			first := twin.Incidents[0]
			if first.Rule != tc.rule || !slices.Equal(first.Culprits, tc.culprits) {
				t.Errorf("incident: got rule %q, culprits %v; want %q, %v", first.Rule, first.Culprits, tc.rule, tc.culprits)
			}
			var labels []string
			for _, e := range first.Effects {
				labels = append(labels, e.Label)
			}
			if tc.rule == "" {
				labels = labels[:0]
				tc.labels = tc.labels[:0]
			}
			if !slices.Equal(labels, tc.labels) {
				t.Errorf("effect labels: got %q, want %q", labels, tc.labels)
			}
			if tc.rule == "" {
				return
			}
			// The culprit and the extra effect say so in their details too.
			attempt := string(getBody(t, srv.url+"/executions/"+id+"/attempt?step=step-1&n=2"))
			if !strings.Contains(attempt, `data-testid="detail-culprit"`) || !strings.Contains(attempt, "caused duplicate") {
				t.Errorf("attempt 2's detail: want the culprit note, got\n%s", attempt)
			}
			extra := first.Effects[1]
			effect := string(getBody(t, srv.url+"/executions/"+id+"/effect?provider="+extra.Provider+"&id="+extra.ID))
			if !strings.Contains(effect, "2 of 2 · extra") {
				t.Errorf("extra effect's detail: want \"2 of 2 · extra\", got\n%s", effect)
			}
		})
	}
}

func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	return body
}

func parseHTML(t *testing.T, body []byte) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// testIDTexts are the texts of the elements with data-testid id.
func testIDTexts(doc *html.Node, id string) []string {
	var out []string
	for n := range doc.Descendants() {
		for _, a := range n.Attr {
			if a.Key == "data-testid" && a.Val == id {
				var b strings.Builder
				drawnText(&b, n)
				out = append(out, b.String())
			}
		}
	}
	return out
}

// drawnText writes n's text as drawn before anything has the focus: a
// cut id's whole form (class sid-full) and buttons left out.
func drawnText(b *strings.Builder, n *html.Node) {
	if n.Type == html.ElementNode && n.Data == "button" {
		return
	}
	for _, a := range n.Attr {
		if a.Key == "class" && a.Val == "sid-full" {
			return
		}
	}
	if n.Type == html.TextNode {
		b.WriteString(n.Data)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		drawnText(b, c)
	}
}
