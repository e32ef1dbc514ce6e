package views_test

import (
	"slices"
	"testing"

	"golang.org/x/net/html"

	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// A live row's detail reads as separate parts, in its text (copied, read
// aloud) and not only on screen: "jordan@piedpiper.com · ik_many_59",
// never "jordan@piedpiper.comik_many_59".
func TestLiveRowDetailSeparators(t *testing.T) {
	rows := []views.LiveRowView{
		{Seq: 3, At: at(3), ExecutionID: "exec_1", What: "effect", Detail: "msg_1 to jordan@piedpiper.com", Key: "ik_many_59"},
		{Seq: 2, At: at(2), ExecutionID: "exec_1", What: "attempt 2 of step-4", Detail: "send_invoice_email → mail-api",
			Outcome: trace.OutcomeOK, Deduplicated: true, Key: "ik_many_59"},
		{Seq: 1, At: at(1), ExecutionID: "exec_1", What: "attempt 1 of step-1", Outcome: trace.OutcomeOK},
	}
	doc := renderPage(t, views.LivePage(views.LiveView{Rows: rows, SocketURL: "/api/v1/live?after=3", Cap: 200}))
	want := []string{
		"msg_1 to jordan@piedpiper.com · ik_many_59",
		"send_invoice_email → mail-api · ✓ ok · ≡ deduplicated · ik_many_59",
		"✓ ok",
	}
	if got := mapProse(byTestID(doc, "live-detail")); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func mapProse(ns []*html.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = prose(n)
	}
	return out
}
