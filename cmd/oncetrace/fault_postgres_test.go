package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store/postgres/pgtest"
)

// faultRecovery is how soon after the database is back both instances
// must take writes again (issue 22's acceptance).
const faultRecovery = 5 * time.Second

// TestPostgresFaults runs two serve processes on one PostgreSQL database,
// four clients posting continuously through both and a live tail on each,
// and meanwhile restarts PostgreSQL, terminates every backend of the
// database (pg_terminate_backend, as an administrator or a failover does),
// stops it for 20 s, and freezes it (SIGSTOP) for 10 s. No answer is ever a 500 (only 200, or 503 with
// Retry-After, which the clients retry as exporters do); both instances
// write again within 5 s of the database being back; /healthz says
// degraded while it is away; every acknowledged event is in the store
// exactly once, and both tails deliver every event once, in one order.
//
// It starts a cluster of its own, since it stops it.
func TestPostgresFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two servers as processes and stops a PostgreSQL cluster for 20 s")
	}
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skipf("stops the server: needs a cluster of its own, not the one %s names", pgtest.EnvURL)
	}
	cluster, err := pgtest.Start()
	if err != nil && (pgtest.Required() || !errors.Is(err, pgtest.ErrUnavailable)) {
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(cluster.Stop)       // after the database's own cleanup drops it
	dsn := cluster.NewDatabase(t) // skips on a nil cluster, or fails when required
	dbName := strings.TrimPrefix(mustParseURL(t, dsn).Path, "/")

	bin := durabilityOncetraceBinary(t)
	a := startDurabilityServer(t, bin, dsn, "", "serve-a.log", "--live-buffer", "1000000")
	b := startDurabilityServer(t, bin, dsn, "", "serve-b.log", "--live-buffer", "1000000")
	servers := []*durabilityServer{a, b}
	tails := []*tail{dialTail(t, a.url, 0), dialTail(t, b.url, 0)}

	load := &faultLoad{}
	stop := make(chan struct{})
	var clients sync.WaitGroup
	for c := range 4 {
		clients.Go(func() { load.client(c, servers, stop) })
	}
	clients.Go(func() { load.reader(servers, stop) })

	waitWrites := func(fault string, back time.Time) {
		t.Helper()
		for i, s := range servers {
			got, ok := load.firstAckAfter(i, back, back.Add(faultRecovery+10*time.Second))
			switch {
			case !ok:
				t.Errorf("%s: instance %s took no write within %v of the database being back\n%s", fault, "AB"[i:i+1], faultRecovery+10*time.Second, s.logText())
			case got.Sub(back) > faultRecovery:
				t.Errorf("%s: instance %s took its first write %v after the database was back, want within %v", fault, "AB"[i:i+1], got.Sub(back).Round(time.Millisecond), faultRecovery)
			default:
				t.Logf("%s: instance %s writes again %v after the database is back", fault, "AB"[i:i+1], got.Sub(back).Round(time.Millisecond))
			}
		}
		time.Sleep(2 * time.Second) // writes flow undisturbed a while: load, not synchronisation
	}
	// Writes flow first.
	waitWrites("start", time.Now())

	if err := cluster.Restart(); err != nil {
		t.Fatal(err)
	}
	waitWrites("restart", time.Now())

	if err := cluster.Exec(fmt.Sprintf(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s' AND pid <> pg_backend_pid()`, dbName)); err != nil {
		t.Fatal(err)
	}
	waitWrites("pg_terminate_backend", time.Now())

	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	haltedAt := time.Now()
	// While it is away, /healthz says so on both (once a write has failed).
	for i, s := range servers {
		if body, ok := waitDegraded(s.url, haltedAt.Add(10*time.Second)); !ok {
			t.Errorf("instance %s: /healthz while PostgreSQL is stopped: got %s, want 503 degraded with a reason", "AB"[i:i+1], body)
		}
	}
	time.Sleep(time.Until(haltedAt.Add(20 * time.Second))) // the outage itself: nothing to wait for
	if err := cluster.Resume(); err != nil {
		t.Fatal(err)
	}
	waitWrites("20 s stop", time.Now())

	// A frozen server (SIGSTOP: a hung machine, a paused container) keeps
	// its connections open and answers nothing.
	if err := cluster.Freeze(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second) // the outage itself
	if err := cluster.Thaw(); err != nil {
		t.Fatal(err)
	}
	waitWrites("10 s SIGSTOP", time.Now())

	close(stop)
	clients.Wait()
	load.mu.Lock()
	t.Logf("%d requests: %d answered 200, %d answered 503; %d events acknowledged; %d reads, %d answered 503", load.requests, load.ok, load.unavailable, len(load.acked), load.reads, load.readsUnavailable)
	for _, e := range load.errors {
		t.Error(e)
	}
	if load.unavailable == 0 {
		t.Error("no request was answered 503: the faults did not reach the writers")
	}
	acked := load.acked
	load.mu.Unlock()
	if t.Failed() {
		t.Fatalf("serve A:\n%s\nserve B:\n%s", a.logText(), b.logText())
	}

	for i, s := range servers {
		if resp, err := http.Get(s.url + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("instance %s: /healthz after the faults: got %v %v, want 200", "AB"[i:i+1], statusOf(resp), err)
		} else {
			resp.Body.Close()
		}
	}

	// Every acknowledged event once in the store, and nothing else (the
	// clients retried every 503 until it was acknowledged).
	stored := exportedIDs(t, bin, dsn) // fails on an id exported twice
	for id := range acked {
		if !stored[id] {
			t.Errorf("event %s: acknowledged, got absent from the store", id)
		}
	}
	if len(stored) != len(acked) {
		t.Errorf("stored events: got %d, want the %d acknowledged", len(stored), len(acked))
	}

	// Both tails deliver every event once, in one order.
	for _, m := range []struct{ to, id string }{{a.url, "fault-marker-A"}, {b.url, "fault-marker-B"}} {
		marker := json.RawMessage(fmt.Sprintf(`{"type":"execution","id":%q,"execution_id":"fault-marker","name":"marker"}`, m.id))
		if res, err := postEvents(m.to, []json.RawMessage{marker}, false); err != nil || res.Accepted != 1 {
			t.Fatalf("marker %s: got accepted %d, err %v, want 1", m.id, res.Accepted, err)
		}
	}
	seen := [2][]tailEvent{tails[0].until(t, "fault-marker-B"), tails[1].until(t, "fault-marker-B")}
	for i, events := range seen {
		count := map[string]int{}
		for j, e := range events {
			count[e.id]++
			if j > 0 && e.seq <= events[j-1].seq {
				t.Errorf("tail on %s: event %s has seq %d after %d, want increasing", "AB"[i:i+1], e.id, e.seq, events[j-1].seq)
			}
		}
		missing := 0
		for id := range acked {
			if count[id] != 1 {
				missing++
				if missing <= 5 {
					t.Errorf("tail on %s: event %s got %d times, want once", "AB"[i:i+1], id, count[id])
				}
			}
		}
		if n := len(events); n != len(acked)+2 {
			t.Errorf("tail on %s: got %d events, want %d (the acknowledged ones and two markers)", "AB"[i:i+1], n, len(acked)+2)
		}
	}
	if !slices.Equal(seen[0], seen[1]) {
		t.Errorf("tails on A and B: got different sequences (%d and %d events), want one commit order", len(seen[0]), len(seen[1]))
	}
	a.signal(t, syscall.SIGTERM)
	b.signal(t, syscall.SIGTERM)
}

// faultLoad is what the fault test's clients saw.
type faultLoad struct {
	mu          sync.Mutex
	requests    int
	ok          int
	unavailable int
	acked       map[string]bool
	ackTimes    [2][]time.Time // when each instance answered a 200
	errors      []string       // answers that must never happen

	reads, readsUnavailable int
}

// reader reads the list of executions from the two instances in turn
// until stop: 200, or 503 with Retry-After while the database is away,
// never a 500.
func (l *faultLoad) reader(servers []*durabilityServer, stop <-chan struct{}) {
	httpc := &http.Client{Timeout: 30 * time.Second}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		to := n % 2
		resp, err := httpc.Get(servers[to].url + "/api/v1/executions?limit=5")
		l.mu.Lock()
		l.reads++
		switch {
		case err != nil:
			l.errors = append(l.errors, fmt.Sprintf("reader to %s: %v", "AB"[to:to+1], err))
		case resp.StatusCode == http.StatusOK:
		case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
			l.readsUnavailable++
		default:
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			l.errors = append(l.errors, fmt.Sprintf("reader to %s: got %d %s, want 200 or 503 with Retry-After", "AB"[to:to+1], resp.StatusCode, data))
		}
		l.mu.Unlock()
		if resp != nil {
			resp.Body.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// client posts batches of five attempt events, to the two instances in
// turn, until stop; a 503 is retried, to the same instance, after a short
// pause (as an OTLP exporter retries), until it is acknowledged.
func (l *faultLoad) client(c int, servers []*durabilityServer, stop <-chan struct{}) {
	httpc := &http.Client{Timeout: 30 * time.Second}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		var ids []string
		var body bytes.Buffer
		for i := range 5 {
			id := fmt.Sprintf("fault-c%d-%d-%d", c, n, i)
			ids = append(ids, id)
			fmt.Fprintf(&body, `{"type":"attempt","id":%q,"execution_id":"fault-client-%d","step_id":"send-%d","attempt":%d,"tool":"send_invoice_email","outcome":"ok"}`+"\n",
				id, c, n, i+1)
		}
		to := (c + n) % 2
		for {
			status, retryAfter, text, err := post(httpc, servers[to].url+"/api/v1/events", body.Bytes())
			now := time.Now()
			l.mu.Lock()
			l.requests++
			switch {
			case err != nil:
				l.errors = append(l.errors, fmt.Sprintf("client %d to %s: %v", c, "AB"[to:to+1], err))
			case status == http.StatusOK:
				l.ok++
				if l.acked == nil {
					l.acked = map[string]bool{}
				}
				for _, id := range ids {
					l.acked[id] = true
				}
				l.ackTimes[to] = append(l.ackTimes[to], now)
			case status == http.StatusServiceUnavailable && retryAfter != "":
				l.unavailable++
			default:
				l.errors = append(l.errors, fmt.Sprintf("client %d to %s: got %d (Retry-After %q) %s, want 200 or 503 with Retry-After", c, "AB"[to:to+1], status, retryAfter, text))
			}
			l.mu.Unlock()
			if err == nil && status == http.StatusOK {
				break
			}
			if err != nil || (status != http.StatusServiceUnavailable) {
				return // already an error of the test; stop this client
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func post(c *http.Client, u string, body []byte) (status int, retryAfter, text string, err error) {
	resp, err := c.Post(u, "application/x-ndjson", bytes.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(data), nil
}

// firstAckAfter waits until instance i answered a 200 after since, or
// deadline passes.
func (l *faultLoad) firstAckAfter(i int, since, deadline time.Time) (time.Time, bool) {
	for {
		l.mu.Lock()
		for _, at := range l.ackTimes[i] {
			if at.After(since) {
				l.mu.Unlock()
				return at, true
			}
		}
		l.mu.Unlock()
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDegraded polls /healthz until it answers 503 {"status":"degraded"}
// with a reason, or deadline passes; it returns the last answer.
func waitDegraded(serverURL string, deadline time.Time) (string, bool) {
	last := ""
	for {
		resp, err := http.Get(serverURL + "/healthz")
		if err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = fmt.Sprintf("%d %s", resp.StatusCode, data)
			var h struct{ Status, Reason string }
			if json.Unmarshal(data, &h) == nil && resp.StatusCode == http.StatusServiceUnavailable && h.Status == "degraded" && h.Reason != "" {
				return last, true
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return last, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func statusOf(resp *http.Response) string {
	if resp == nil {
		return "no answer"
	}
	resp.Body.Close()
	return resp.Status
}

func mustParseURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
