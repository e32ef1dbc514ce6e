package web_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
)

// TestOrderIndependence is the differential property test of docs/audit.md
// § "Order independence": every derived answer is a function of the set
// of events, never of their arrival order, their split into requests or
// their re-sends. Random histories (order_gen_test.go) are posted through
// the real server, once whole and sorted, and in four other orders and
// splits, each into a server of its own; then every API answer must be
// byte-identical across them: every page of the executions, findings and
// effects lists, every execution, every key page.
//
// Nothing is normalised. The answers hold no received-at time, no
// sequence number and no event id of a re-send (a re-send is the same
// event, counted as a duplicate and never stored twice), so anything that
// differs is derived state that depends on the order.
//
// Histories share servers (each has its own prefix, providers included,
// so that none meets another's events): the per-server cost stays out of
// the loop, and the writer's cache carries from one history to the next
// as it does in production. A history found differing is then posted
// alone on fresh servers and shrunk to a minimal reproduction.
//
// ONCETRACE_ORDER_HISTORIES sets how many histories (make fuzz-audit runs
// 5,000), ONCETRACE_ORDER_SEED the first one's seed (history i has seed
// + i).
func TestOrderIndependence(t *testing.T) {
	n := orderHistoriesDefault
	if v := os.Getenv("ONCETRACE_ORDER_HISTORIES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("ONCETRACE_ORDER_HISTORIES=%q: want a positive number", v)
		}
	} else if testing.Short() {
		n = 20
	}
	base := int64(20260701)
	if v := os.Getenv("ONCETRACE_ORDER_SEED"); v != "" {
		var err error
		if base, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("ONCETRACE_ORDER_SEED=%q: want a number", v)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 8, n)
	t.Logf("%d histories from seed %d on %d workers", n, base, workers)
	start := time.Now()
	results := make([]orderWorkerResult, workers)
	t.Run("workers", func(t *testing.T) {
		for w := range workers {
			t.Run(fmt.Sprint(w), func(t *testing.T) {
				t.Parallel()
				var hs []*orderHistory
				for i := w; i < n; i += workers {
					hs = append(hs, generateOrderHistory(base+int64(i), i))
				}
				// Fresh servers every orderBatch histories, so that a long
				// run costs the same per history throughout.
				results[w] = orderWorkerResult{features: map[string]int{}, rules: map[string]int{}, states: map[string]int{}}
				for from := 0; from < len(hs); from += orderBatch {
					batch := hs[from:min(from+orderBatch, len(hs))]
					t.Run(fmt.Sprintf("seeds %d to %d", batch[0].seed, batch[len(batch)-1].seed), func(t *testing.T) {
						results[w].add(runOrderWorker(t, batch))
					})
				}
			})
		}
	})
	features, rules, states := map[string]int{}, map[string]int{}, map[string]int{}
	items, requests := 0, 0
	for _, r := range results {
		for k, v := range r.features {
			features[k] += v
		}
		for k, v := range r.rules {
			rules[k] += v
		}
		for k, v := range r.states {
			states[k] += v
		}
		items += r.items
		requests += r.requests
	}
	t.Logf("%d histories, %d items, %d requests in %d orders, in %v", n, items, requests, len(orderNames), time.Since(start).Round(time.Millisecond))
	t.Logf("generated: %s", countsLine(features))
	t.Logf("findings: %s; audit states: %s", countsLine(rules), countsLine(states))
	if n >= 100 && !t.Failed() {
		// The comparison means little unless the histories reach the
		// rules that order can change.
		for _, rule := range []string{"duplicate_effect", "orphan_effect", "missing_effect", "unkeyed_retry", "unstable_key",
			"key_collision", "unsafe_retried", "key_shared_across_executions", "suppressed_as_repeat"} {
			if rules[rule] == 0 {
				t.Errorf("findings of %s: got none in %d histories, want some", rule, n)
			}
		}
	}
}

func countsLine(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// orderNames are the arrivals every history is posted in; the first is
// the reference.
var orderNames = []string{
	"sorted, whole",
	"reversed",
	"shuffled, in random chunks",
	"shuffled, one a request",
	"spans as exported, events anywhere",
}

// orderRequest is one POST: native events or OTLP spans, by their index
// in the history.
type orderRequest struct {
	kind  orderItemKind
	items []int
}

// arrivals are the requests of each of orderNames for a history: a
// function of its seed, so that a failure can be replayed.
func arrivals(h *orderHistory) [][]orderRequest {
	r := rand.New(rand.NewSource(h.seed ^ 0x5eed))
	all := make([]int, len(h.items))
	for i := range all {
		all[i] = i
	}
	shuffled := func() []int {
		out := slices.Clone(all)
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
	// split posts spans one a request, as SimpleSpanProcessor exports
	// them, and runs of native events in requests of up to chunk() each.
	split := func(order []int, chunk func() int) []orderRequest {
		var out []orderRequest
		var run []int
		size := 0
		flush := func() {
			if len(run) > 0 {
				out = append(out, orderRequest{itemNative, run})
				run = nil
			}
		}
		for _, i := range order {
			if h.items[i].kind == itemSpan {
				flush()
				out = append(out, orderRequest{itemSpan, []int{i}})
				continue
			}
			if len(run) == 0 {
				size = chunk()
			}
			run = append(run, i)
			if len(run) >= size {
				flush()
			}
		}
		flush()
		return out
	}
	whole := func() int { return len(h.items) }

	var sorted []orderRequest
	var natives, spans []int
	for _, i := range all {
		if h.items[i].kind == itemSpan {
			spans = append(spans, i)
		} else {
			natives = append(natives, i)
		}
	}
	if len(natives) > 0 {
		sorted = append(sorted, orderRequest{itemNative, natives})
	}
	if len(spans) > 0 {
		// A BatchSpanProcessor's one export.
		sorted = append(sorted, orderRequest{itemSpan, spans})
	}
	reversed := slices.Clone(all)
	slices.Reverse(reversed)

	// Spans in the order they ended, the events anywhere among them.
	var exported []int
	rest := shuffled()
	for _, i := range spans {
		exported = append(exported, i)
	}
	for _, i := range rest {
		if h.items[i].kind == itemNative {
			at := r.Intn(len(exported) + 1)
			exported = slices.Insert(exported, at, i)
		}
	}
	return [][]orderRequest{
		sorted,
		split(reversed, whole),
		split(shuffled(), func() int { return 1 + r.Intn(6) }),
		split(shuffled(), func() int { return 1 }),
		split(exported, func() int { return 1 + r.Intn(3) }),
	}
}

// postOrder sends a history's requests, keeping only the items keep allows
// (nil: all), and returns how many it sent. Native events go in a body
// kind rng picks (NDJSON when nil).
func postOrder(srv *testServer, h *orderHistory, reqs []orderRequest, keep []bool, rng *rand.Rand) (int, error) {
	sent := 0
	for _, req := range reqs {
		var bodies []string
		var spans []orderItem
		for _, i := range req.items {
			if keep == nil || keep[i] {
				bodies = append(bodies, h.items[i].body)
				spans = append(spans, h.items[i])
			}
		}
		if len(bodies) == 0 {
			continue
		}
		sent++
		if req.kind == itemSpan {
			if err := postSpans(srv, spans); err != nil {
				return sent, err
			}
			continue
		}
		events := make([]json.RawMessage, len(bodies))
		for i, b := range bodies {
			events[i] = json.RawMessage(b)
		}
		kind := bodyNDJSON
		if rng != nil {
			kind = bodyKind(rng.Intn(int(bodyKinds)))
		}
		if _, err := srv.tryPost(encodeBody(events, kind)); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// postSpans sends spans in one OTLP/JSON export request, under their
// resources.
func postSpans(srv *testServer, spans []orderItem) error {
	var resources []string
	byResource := map[string][]string{}
	for _, s := range spans {
		if _, ok := byResource[s.resource]; !ok {
			resources = append(resources, s.resource)
		}
		byResource[s.resource] = append(byResource[s.resource], s.body)
	}
	var parts []string
	for _, r := range resources {
		attrs := cmp.Or(r, "[]")
		parts = append(parts, `{"resource":{"attributes":`+attrs+`},"scopeSpans":[{"scope":{"name":"agent"},"spans":[`+
			strings.Join(byResource[r], ",")+`]}]}`)
	}
	body := `{"resourceSpans":[` + strings.Join(parts, ",") + `]}`
	resp, err := srv.ts.Client().Post(srv.ts.URL+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || bytes.Contains(data, []byte("rejected")) {
		return fmt.Errorf("POST /v1/traces: got %d %s, want 200 with every span accepted; request: %s", resp.StatusCode, data, body)
	}
	return nil
}

// ---- one worker: its histories on its own servers ----

type orderWorkerResult struct {
	features, rules, states map[string]int
	items, requests         int
}

func (r *orderWorkerResult) add(o orderWorkerResult) {
	for _, m := range [][2]map[string]int{{r.features, o.features}, {r.rules, o.rules}, {r.states, o.states}} {
		for k, v := range m[1] {
			m[0][k] += v
		}
	}
	r.items += o.items
	r.requests += o.requests
}

// orderBatch is how many histories share one set of servers.
const orderBatch = 125

func runOrderWorker(t *testing.T, hs []*orderHistory) orderWorkerResult {
	res := orderWorkerResult{features: map[string]int{}, rules: map[string]int{}, states: map[string]int{}}
	servers := make([]*testServer, len(orderNames))
	for i, name := range orderNames {
		servers[i] = startServer(t, name, ingest.DefaultLimits)
	}
	var keys []string
	for _, h := range hs {
		for k, v := range h.features {
			res.features[k] += v
		}
		res.items += len(h.items)
		// Each order to its own server, all at once: a server's writer
		// waits for its client most of the time.
		reqs := arrivals(h)
		sent := make([]int, len(reqs))
		errs := make([]error, len(reqs))
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Go(func() {
				sent[i], errs[i] = postOrder(servers[i], h, reqs[i], nil, rand.New(rand.NewSource(h.seed+int64(i))))
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("history seed %d, %s: %v", h.seed, orderNames[i], err)
			}
			res.requests += sent[i]
		}
		keys = append(keys, h.keys...)
	}
	snaps := make([]*snapshot, len(servers))
	for i, srv := range servers {
		snaps[i] = orderSnapshot(t, srv, keys)
	}
	countFindings(t, snaps[0], res.rules, res.states)

	failing := map[*orderHistory][]int{} // history -> orders that differ
	parts := map[*orderHistory][]string{}
	var unattributed []string
	for i := 1; i < len(snaps); i++ {
		differ := differingParts(snaps[i], snaps[0])
		// A list page that differs names every history after the
		// difference; the items listed name only their own.
		itemsDiffer := slices.ContainsFunc(differ, func(name string) bool { return !isPage(name) })
		for _, name := range differ {
			if isPage(name) && itemsDiffer {
				continue
			}
			found := historiesIn(hs, name, snaps[i].parts[name], snaps[0].parts[name])
			if len(found) == 0 || isPage(name) {
				unattributed = append(unattributed, fmt.Sprintf("%s: %s", orderNames[i], name))
				continue
			}
			for _, h := range found {
				if !slices.Contains(failing[h], i) {
					failing[h] = append(failing[h], i)
				}
				parts[h] = append(parts[h], orderNames[i]+": "+name)
			}
		}
	}
	if len(failing) == 0 && len(unattributed) == 0 {
		return res
	}
	for _, name := range unattributed {
		t.Errorf("answer %s differs, though every item listed is the same", name)
	}
	var list []*orderHistory
	for h := range failing {
		list = append(list, h)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].seed < list[j].seed })
	t.Errorf("%d of %d histories give answers that depend on the order: seeds %v", len(list), len(hs), seedsOf(list))
	for i, h := range list {
		if i >= 3 {
			t.Errorf("(the other %d are not reproduced here)", len(list)-i)
			break
		}
		reproduce(t, h, failing[h], parts[h])
	}
	return res
}

func seedsOf(hs []*orderHistory) []int64 {
	var out []int64
	for _, h := range hs {
		out = append(out, h.seed)
	}
	return out
}

// historiesIn returns the histories whose names appear in an answer's
// name, or around where the two versions of it first differ.
func historiesIn(hs []*orderHistory, name string, a, b []byte) []*orderHistory {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	text := name + " " + string(a[max(0, i-400):min(len(a), i+400)]) + " " + string(b[max(0, i-400):min(len(b), i+400)])
	var out []*orderHistory
	for _, h := range hs {
		found := regexp.MustCompile(`\b` + regexp.QuoteMeta(h.prefix)).MatchString(text)
		for _, n := range h.names {
			found = found || strings.Contains(text, n)
		}
		if found {
			out = append(out, h)
		}
	}
	return out
}

// countFindings tallies the reference's findings by rule, and its
// executions by audit state.
func countFindings(t *testing.T, snap *snapshot, rules, states map[string]int) {
	t.Helper()
	var fs struct {
		Findings []struct {
			Rule string `json:"rule"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(snap.part("findings"), &fs); err != nil {
		t.Fatal(err)
	}
	for _, f := range fs.Findings {
		rules[f.Rule]++
	}
	for _, name := range snap.names {
		if !strings.HasPrefix(name, "executions page") {
			continue
		}
		var list struct {
			Executions []struct {
				Audit string `json:"audit_state"`
			} `json:"executions"`
		}
		if err := json.Unmarshal(snap.part(name), &list); err != nil {
			t.Fatal(err)
		}
		for _, x := range list.Executions {
			states[x.Audit]++
		}
	}
}

// orderSnapshot is every answer of a server: the lists page by page (small
// pages, so that the cursors are compared too), every execution, every
// key page.
func orderSnapshot(t *testing.T, srv *testServer, keys []string) *snapshot {
	t.Helper()
	snap := &snapshot{parts: map[string][]byte{}}
	type page struct {
		Executions []struct {
			ID string `json:"execution_id"`
		} `json:"executions"`
		Findings []json.RawMessage `json:"findings"`
		Next     string            `json:"next"`
	}
	pages := func(list string, limit int, each func(page)) {
		for cursor := ""; ; {
			data := srv.get(t, fmt.Sprintf("/api/v1/%s?limit=%d&cursor=%s", list, limit, url.QueryEscape(cursor)))
			snap.add(fmt.Sprintf("%s page after %q", list, cursor), data)
			var p page
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatal(err)
			}
			each(p)
			if cursor = p.Next; cursor == "" {
				return
			}
		}
	}
	var ids []string
	pages("executions", 25, func(p page) {
		for _, x := range p.Executions {
			ids = append(ids, x.ID)
		}
	})
	for _, id := range ids {
		snap.add("execution "+id, srv.get(t, "/api/v1/executions/"+url.PathEscape(id)))
	}
	pages("effects", 25, func(page) {})
	var findings []json.RawMessage
	pages("findings", 20, func(p page) { findings = append(findings, p.Findings...) })
	data, err := json.Marshal(map[string]any{"findings": findings})
	if err != nil {
		t.Fatal(err)
	}
	snap.add("findings", data)
	addListedItems(t, snap)
	for _, k := range keys {
		// A key that nothing stored carries (an attempt's end event that
		// disagreed with its start) is a 404, which every order must give
		// alike.
		snap.add("key "+k, srv.getAnswer(t, "/api/v1/keys/"+url.PathEscape(k), http.StatusOK, http.StatusNotFound))
	}
	return snap
}

// getAnswer is get for a path whose answer may be any of statuses: the
// status, then the body.
func (s *testServer) getAnswer(t *testing.T, path string, statuses ...int) []byte {
	t.Helper()
	resp, err := s.ts.Client().Get(s.ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(statuses, resp.StatusCode) {
		t.Fatalf("GET %s: got status %d, want one of %v: %s", path, resp.StatusCode, statuses, data)
	}
	return append([]byte(strconv.Itoa(resp.StatusCode)+" "), data...)
}

// isPage tells a list page from an answer about one thing.
func isPage(name string) bool {
	return strings.Contains(name, " page after ") || name == "findings"
}

// addListedItems adds, beside the list pages, each item they list as an
// answer of its own: what a list shows of one execution, one effect, and
// the findings of one execution, in list order.
func addListedItems(t *testing.T, snap *snapshot) {
	t.Helper()
	type item struct {
		ID       string `json:"execution_id"`
		Provider string `json:"provider"`
		EffectID string `json:"effect_id"`
	}
	var listed []string
	byName := map[string][]json.RawMessage{}
	add := func(name string, raw json.RawMessage) {
		if _, ok := byName[name]; !ok {
			listed = append(listed, name)
		}
		byName[name] = append(byName[name], raw)
	}
	for _, name := range slices.Clone(snap.names) {
		var page struct {
			Executions []json.RawMessage `json:"executions"`
			Effects    []json.RawMessage `json:"effects"`
			Findings   []json.RawMessage `json:"findings"`
		}
		if !strings.HasPrefix(name, "executions page") && !strings.HasPrefix(name, "effects page") && name != "findings" {
			continue
		}
		if err := json.Unmarshal(snap.part(name), &page); err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Executions {
			var it item
			json.Unmarshal(raw, &it)
			add("listed execution "+it.ID, raw)
		}
		for _, raw := range page.Effects {
			var it item
			json.Unmarshal(raw, &it)
			add("listed effect "+it.Provider+"/"+it.EffectID, raw)
		}
		for _, raw := range page.Findings {
			var it item
			json.Unmarshal(raw, &it)
			add("listed findings of "+it.ID, raw)
		}
	}
	for _, name := range listed {
		data, err := json.Marshal(byName[name])
		if err != nil {
			t.Fatal(err)
		}
		snap.add(name, data)
	}
}

// differingParts names the answers of got that differ from want's, or that
// only one of them has.
func differingParts(got, want *snapshot) []string {
	var out []string
	for _, name := range want.names {
		if g, ok := got.parts[name]; !ok || !bytes.Equal(g, want.parts[name]) {
			out = append(out, name)
		}
	}
	for _, name := range got.names {
		if _, ok := want.parts[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

// TestOrderRegressions holds minimal histories TestOrderIndependence found
// answering differently, each posted in the order that broke it and whole
// (the events in one request, then the spans in one): the answers must be
// the same.
func TestOrderRegressions(t *testing.T) {
	tests := []struct {
		name  string
		items []orderItem
		order []orderRequest // the order that broke
	}{
		{
			// Two identical charges of one run from stray HTTP spans, one
			// by its key, one naming the run: the orphan recheck of the
			// first took in the second (identical) and called it an
			// orphan, and the run's analysis, which says duplicate, was
			// not written again (the writer remembered writing it).
			name: "an identical effect rechecked with another",
			items: []orderItem{
				{kind: itemNative, body: `{"at":"2030-01-22T09:00:46.879Z","effect_id":"h1301-fx-8","fingerprint":"charge_card map[amount:100 currency:eur]","idempotency_key":"h1301-ik-5-a1","provider":"h1301-pay","span_id":"b1a4c74621188ae1","summary":"what charge_card asked","trace_id":"c3e2571cdb1425c5493149f791c91f09","type":"effect"}`},
				{kind: itemSpan, body: `{"traceId":"c3e2571cdb1425c5493149f791c91f09","spanId":"b1a4c74621188ae1","name":"POST","kind":3,"startTimeUnixNano":"1895302846876000000","endTimeUnixNano":"1895302848755000000","attributes":[{"key":"http.request.method","value":{"stringValue":"POST"}},{"key":"url.full","value":{"stringValue":"https://api.example/charge_card"}},{"key":"error.type","value":{"stringValue":"TimeoutError"}}],"status":{"code":2,"message":"TimeoutError: failed"}}`},
				{kind: itemSpan, body: `{"traceId":"a91f7894634b3c662137666007b222e2","spanId":"36e20acc83824f48","parentSpanId":"251c502a56eafa60","name":"charge_card","kind":1,"startTimeUnixNano":"1895302846875000000","endTimeUnixNano":"1895302848756000000","attributes":[{"key":"input.value","value":{"stringValue":"{\"amount\":100,\"currency\":\"eur\"}"}},{"key":"oncetrace.idempotency.key","value":{"stringValue":"h1301-ik-5-a1"}},{"key":"openinference.span.kind","value":{"stringValue":"TOOL"}},{"key":"tool.name","value":{"stringValue":"charge_card"}},{"key":"error.type","value":{"stringValue":"TimeoutError"}}],"status":{"code":2,"message":"TimeoutError: failed"}}`},
				{kind: itemNative, body: `{"at":"2030-01-22T09:00:49.350Z","effect_id":"h1301-fx-9","execution_id":"a91f7894634b3c662137666007b222e2","fingerprint":"charge_card map[amount:100 currency:eur]","provider":"h1301-pay","span_id":"ad37fa75902e9252","trace_id":"fb2af99c871b367c16a30684c8b863ab","type":"effect"}`},
				{kind: itemSpan, body: `{"traceId":"fb2af99c871b367c16a30684c8b863ab","spanId":"ad37fa75902e9252","name":"POST","kind":3,"startTimeUnixNano":"1895302849338000000","endTimeUnixNano":"1895302851502000000","attributes":[{"key":"http.request.method","value":{"stringValue":"POST"}},{"key":"url.full","value":{"stringValue":"https://api.example/charge_card"}},{"key":"error.type","value":{"stringValue":"TimeoutError"}}],"status":{"code":2,"message":"TimeoutError: failed"}}`},
			},
			order: []orderRequest{{itemNative, []int{3}}, {itemSpan, []int{4}}, {itemSpan, []int{2}}, {itemNative, []int{0}}, {itemSpan, []int{1}}},
		},
		{
			// A report of an effect with only its trace context made the
			// trace id its execution; a second report naming the run
			// (which wins the fold) left that placeholder behind.
			name: "an effect whose later report names its execution",
			items: []orderItem{
				{kind: itemNative, body: `{"at":"2026-07-01T09:00:55.794Z","effect_id":"h0-fx-10","fingerprint":"send_email map[subject:Welcome to:user2@example.com]","id":"h0-ev-11","idempotency_key":"h0-ik-9","provider":"h0-mail","span_id":"19903d88ca85d158","target":"user1@example.com","trace_id":"7c8e0d63c16ca2abf7be89dc425400c0","type":"effect"}`},
				{kind: itemNative, body: `{"at":"2026-07-01T09:00:55.794Z","effect_id":"h0-fx-10","execution_id":"h0-run-8","id":"h0-ev-12","provider":"h0-mail","step_id":"s1","type":"effect"}`},
			},
			order: []orderRequest{{itemNative, []int{0}}, {itemNative, []int{1}}},
		},
		{
			// Three identical emails, one named by a report that loses the
			// fold to another: the run called it a duplicate of the other
			// two while no tool call held them, then, once its spans
			// arrived, gave it no state at all, and the duplicate stayed.
			name: "a duplicate no analysis calls one any more",
			items: []orderItem{
				{kind: itemNative, body: `{"at":"2026-07-01T09:00:10.962Z","effect_id":"h0-fx-2","fingerprint":"send_email map[subject:Invoice to:user0@example.com]","idempotency_key":"h0-ik-1","provider":"h0-mail","span_id":"ede6da2492d9cd50","summary":"what send_email asked","target":"user0@example.com","trace_id":"a30cdac2f37ca7fa01d2104e2e0363ac","type":"effect"}`},
				{kind: itemSpan, body: `{"traceId":"a30cdac2f37ca7fa01d2104e2e0363ac","spanId":"2c54c7d720e76de5","parentSpanId":"ed1412283dec9150","name":"execute_tool send_email","kind":1,"startTimeUnixNano":"1782896410942000000","endTimeUnixNano":"1782896412660000000","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},{"key":"gen_ai.tool.call.arguments","value":{"stringValue":"{\"subject\":\"Invoice\",\"to\":\"user0@example.com\"}"}},{"key":"gen_ai.tool.call.id","value":{"stringValue":"call_3bd3c8c0"}},{"key":"gen_ai.tool.name","value":{"stringValue":"send_email"}},{"key":"oncetrace.effect","value":{"stringValue":"write"}},{"key":"oncetrace.idempotency.key","value":{"stringValue":"h0-ik-1"}},{"key":"oncetrace.provider","value":{"stringValue":"h0-mail"}},{"key":"error.type","value":{"stringValue":"TimeoutError"}}],"status":{"code":2,"message":"TimeoutError: failed"}}`, resource: `[{"key":"service.name","value":{"stringValue":"agent"}}]`},
				{kind: itemNative, body: `{"at":"2026-07-01T09:00:18.791Z","effect_id":"h0-fx-3","fingerprint":"send_email map[subject:Invoice to:user0@example.com]","id":"h0-ev-4","provider":"h0-mail","span_id":"00f40e650f7c37ad","trace_id":"a30cdac2f37ca7fa01d2104e2e0363ac","type":"effect"}`},
				{kind: itemSpan, body: `{"traceId":"a30cdac2f37ca7fa01d2104e2e0363ac","spanId":"00f40e650f7c37ad","parentSpanId":"26e53c7d36c01718","name":"POST","kind":3,"startTimeUnixNano":"1782896418768000000","endTimeUnixNano":"1782896419571000000","attributes":[{"key":"http.request.method","value":{"stringValue":"POST"}},{"key":"http.response.status_code","value":{"intValue":"200"}},{"key":"url.full","value":{"stringValue":"https://api.example/send_email"}}],"status":{"code":1}}`, resource: `[{"key":"service.name","value":{"stringValue":"agent"}}]`},
				{kind: itemSpan, body: `{"traceId":"a30cdac2f37ca7fa01d2104e2e0363ac","spanId":"26e53c7d36c01718","parentSpanId":"ed1412283dec9150","name":"execute_tool send_email","kind":1,"startTimeUnixNano":"1782896418767000000","endTimeUnixNano":"1782896419572000000","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},{"key":"gen_ai.tool.call.arguments","value":{"stringValue":"{\"subject\":\"Welcome\",\"to\":\"user0@example.com\"}"}},{"key":"gen_ai.tool.call.id","value":{"stringValue":"call_b32cccb9"}},{"key":"gen_ai.tool.name","value":{"stringValue":"send_email"}},{"key":"oncetrace.effect","value":{"stringValue":"write"}},{"key":"oncetrace.provider","value":{"stringValue":"h0-mail"}}],"status":{"code":1}}`, resource: `[{"key":"service.name","value":{"stringValue":"agent"}}]`},
				{kind: itemNative, body: `{"at":"2026-07-01T09:00:59.974Z","effect_id":"h0-fx-7","execution_id":"h0-exec-6","fingerprint":"send_email map[subject:Invoice to:user0@example.com]","provider":"h0-mail","step_id":"s1","type":"effect"}`},
				{kind: itemNative, body: `{"at":"2026-07-01T09:00:59.974Z","effect_id":"h0-fx-7","execution_id":"a30cdac2f37ca7fa01d2104e2e0363ac","provider":"h0-mail","step_id":"s1","type":"effect"}`},
			},
			order: []orderRequest{{itemSpan, []int{1}}, {itemNative, []int{2}}, {itemSpan, []int{4}}, {itemNative, []int{6}},
				{itemNative, []int{0}}, {itemNative, []int{5}}, {itemSpan, []int{3}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &orderHistory{items: tt.items}
			var whole []orderRequest
			for _, kind := range []orderItemKind{itemNative, itemSpan} {
				req := orderRequest{kind: kind}
				for i, it := range tt.items {
					if it.kind == kind {
						req.items = append(req.items, i)
					}
				}
				whole = append(whole, req)
			}
			keep := make([]bool, len(tt.items))
			for i := range keep {
				keep[i] = true
			}
			for _, d := range orderDiffers(t, h, whole, tt.order, keep) {
				t.Error(d)
			}
		})
	}
}

// ---- reproducing and shrinking a failure ----

// orderBudget bounds the time spent shrinking one failing history.
const orderBudget = 90 * time.Second

// reproduce posts a failing history alone, in the reference order and in
// each order that differed, on fresh servers; shrinks it to the fewest
// items that still differ; and prints them, the requests, and a diff.
func reproduce(t *testing.T, h *orderHistory, orders []int, parts []string) {
	t.Helper()
	reqs := arrivals(h)
	keepAll := make([]bool, len(h.items))
	for i := range keepAll {
		keepAll[i] = true
	}
	for _, o := range orders {
		diff := orderDiffers(t, h, reqs[0], reqs[o], keepAll)
		if diff == nil {
			t.Errorf("history seed %d: order %q differs (%s) only beside other histories on the same server; alone it does not:\n%s",
				h.seed, orderNames[o], strings.Join(parts, "; "), describeHistory(h, keepAll))
			continue
		}
		keep, shown := shrink(t, h, reqs[0], reqs[o], keepAll, diff)
		t.Errorf("history seed %d: order %q gives other answers than %q.\n"+
			"Reproduce: ONCETRACE_ORDER_SEED=%d ONCETRACE_ORDER_HISTORIES=1 go test ./web -run '^TestOrderIndependence$'\n"+
			"Shrunk to %d of %d items:\n%s\nRequests in %q:\n%s\nRequests in %q:\n%s\n%s",
			h.seed, orderNames[o], orderNames[0], h.seed, count(keep), len(h.items), describeHistory(h, keep),
			orderNames[o], describeRequests(h, reqs[o], keep), orderNames[0], describeRequests(h, reqs[0], keep), shown)
	}
}

// orderDiffers posts the kept items of a history in two orders, each on a
// fresh server, and returns the differences of their answers, nil if none.
func orderDiffers(t *testing.T, h *orderHistory, want, got []orderRequest, keep []bool) []string {
	t.Helper()
	var keys []string
	for _, k := range h.keys {
		keys = append(keys, k)
	}
	a := startServer(t, "reference", ingest.DefaultLimits)
	b := startServer(t, "other order", ingest.DefaultLimits)
	for _, p := range []struct {
		srv  *testServer
		reqs []orderRequest
	}{{a, want}, {b, got}} {
		if _, err := postOrder(p.srv, h, p.reqs, keep, nil); err != nil {
			t.Fatal(err)
		}
	}
	sa, sb := orderSnapshot(t, a, keys), orderSnapshot(t, b, keys)
	var out []string
	for _, name := range differingParts(sb, sa) {
		out = append(out, fmt.Sprintf("--- %s in the reference\n+++ %s in the other order\n%s", name, name,
			lineDiff(pretty(sa.parts[name]), pretty(sb.parts[name]))))
	}
	return out
}

// shrink removes items (with their re-sends) one unit at a time for as
// long as the two orders still differ, within orderBudget.
func shrink(t *testing.T, h *orderHistory, want, got []orderRequest, keep []bool, diff []string) ([]bool, string) {
	t.Helper()
	keep = slices.Clone(keep)
	deadline := time.Now().Add(orderBudget)
	var units []int
	for _, it := range h.items {
		if !slices.Contains(units, it.unit) {
			units = append(units, it.unit)
		}
	}
	for changed := true; changed && time.Now().Before(deadline); {
		changed = false
		for _, u := range units {
			if time.Now().After(deadline) {
				break
			}
			try := slices.Clone(keep)
			removed := false
			for i, it := range h.items {
				if it.unit == u && try[i] {
					try[i], removed = false, true
				}
			}
			if !removed {
				continue
			}
			if d := orderDiffers(t, h, want, got, try); d != nil {
				keep, diff, changed = try, d, true
			}
		}
	}
	if len(diff) > 3 {
		diff = append(diff[:3], fmt.Sprintf("(and %d more answers differ)", len(diff)-3))
	}
	return keep, strings.Join(diff, "\n")
}

func count(keep []bool) int {
	n := 0
	for _, k := range keep {
		if k {
			n++
		}
	}
	return n
}

func describeHistory(h *orderHistory, keep []bool) string {
	var b strings.Builder
	for i, it := range h.items {
		if !keep[i] {
			continue
		}
		kind := "event"
		if it.kind == itemSpan {
			kind = "span "
			if strings.Contains(it.resource, "oncetrace.") {
				kind = "span (resource " + it.resource + ")"
			}
		}
		fmt.Fprintf(&b, "  [%d] %s %s\n", i, kind, it.body)
	}
	return b.String()
}

func describeRequests(h *orderHistory, reqs []orderRequest, keep []bool) string {
	var b strings.Builder
	n := 0
	for _, req := range reqs {
		var items []int
		for _, i := range req.items {
			if keep[i] {
				items = append(items, i)
			}
		}
		if len(items) == 0 {
			continue
		}
		n++
		path := "/api/v1/events"
		if req.kind == itemSpan {
			path = "/v1/traces"
		}
		fmt.Fprintf(&b, "  %d. POST %s %v\n", n, path, items)
	}
	return b.String()
}

func pretty(data []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "  "); err != nil {
		return string(data)
	}
	return b.String()
}

// lineDiff is a line diff of a and b: "-" for lines only in a, "+" for
// lines only in b, with two lines of context around each change.
func lineDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	// Longest common subsequence, by dynamic programming: the answers of
	// one small history are a few hundred lines.
	lcs := make([][]int, len(la)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(lb)+1)
	}
	for i := len(la) - 1; i >= 0; i-- {
		for j := len(lb) - 1; j >= 0; j-- {
			if la[i] == lb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	i, j := 0, 0
	for i < len(la) || j < len(lb) {
		switch {
		case i < len(la) && j < len(lb) && la[i] == lb[j]:
			lines = append(lines, line{' ', la[i]})
			i++
			j++
		case j < len(lb) && (i == len(la) || lcs[i][j+1] >= lcs[i+1][j]):
			lines = append(lines, line{'+', lb[j]})
			j++
		default:
			lines = append(lines, line{'-', la[i]})
			i++
		}
	}
	const context = 2
	var out strings.Builder
	last := -1
	for k, l := range lines {
		near := false
		for d := -context; d <= context; d++ {
			if k+d >= 0 && k+d < len(lines) && lines[k+d].op != ' ' {
				near = true
			}
		}
		if !near {
			continue
		}
		if last >= 0 && k > last+1 {
			out.WriteString("  …\n")
		}
		fmt.Fprintf(&out, "%c %s\n", l.op, l.text)
		last = k
	}
	return out.String()
}
