package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAttackRetention is issue 11's "Nothing ever deletes data: no
// retention, no delete, no vacuum". Served as before (no --retain, still the
// default), a database of 40-day-old executions keeps every one of them.
// With --retain 30d the server prunes at start, in the background, while
// clients post: every post succeeds, the pruned executions are gone from
// the API, the recent execution that shared a key with one of them is
// re-audited, and the file shrinks.
func TestAttackRetention(t *testing.T) {
	db := filepath.Join(t.TempDir(), "retain.db")
	importNDJSON(t, db, oldAndNewNDJSON(3000, time.Now()))

	s := startDemoServer(t, db, "keep.log")
	resp, err := demoHTTP.Get(s.url + "/api/v1/executions/old_00042")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("without --retain, a 40-day-old execution: got %d, want 200 (kept)", resp.StatusCode)
	}
	s.stop(t)
	if n := sqlInt(t, db, `SELECT count(*) FROM executions WHERE execution_id LIKE 'old_%'`); n != 3000 {
		t.Fatalf("without --retain: got %d old executions, want all 3000 kept", n)
	}
	before := fileSize(t, db)
	var peer struct {
		Findings []struct {
			Rule string `json:"rule"`
		} `json:"findings"`
	}

	s = startDemoServer(t, db, "retain.log", "--retain", "30d")
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				x := fmt.Sprintf("live_%d_%d", c, i)
				body := fmt.Sprintf(`{"type":"execution","execution_id":%q,"status":"running","started_at":%q}`, x, time.Now().UTC().Format(time.RFC3339Nano))
				resp, err := demoHTTP.Post(s.url+"/api/v1/events", "application/json", strings.NewReader(body))
				status := 0
				if err == nil {
					status = resp.StatusCode
					resp.Body.Close()
				}
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			}
		}()
	}
	pruneLine := regexp.MustCompile(`msg=prune executions=(\d+) effects=(\d+) .*reaudited=(\d+) .*bytes_before=(\d+) bytes_after=(\d+) vacuum=(\w+)`)
	var m []string
	for deadline := time.Now().Add(60 * time.Second); m == nil; time.Sleep(50 * time.Millisecond) {
		if m = pruneLine.FindStringSubmatch(s.logText()); m == nil && time.Now().After(deadline) {
			t.Fatalf("no prune logged within 60s:\n%s", s.logText())
		}
	}
	wg.Wait()
	if statuses[http.StatusOK] != 400 {
		t.Errorf("posts while pruning: got statuses %v, want 400 × 200", statuses)
	}
	if m[1] != "3000" || m[2] != "3000" || m[3] != "1" || m[6] != "incremental" {
		t.Errorf("prune log: got %q, want 3000 executions and effects, 1 re-audited, incremental vacuum", m[0])
	}
	if b, a := atoi(m[4]), atoi(m[5]); a > b/4 {
		t.Errorf("prune log: database %d -> %d bytes, want under a quarter", b, a)
	}
	resp, err = demoHTTP.Get(s.url + "/api/v1/executions/old_00042")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a pruned execution: got %d, want 404", resp.StatusCode)
	}
	getJSON(t, s.url+"/api/v1/findings?execution_id=recent_peer", &peer)
	for _, f := range peer.Findings {
		if f.Rule == "key_shared_across_executions" || f.Rule == "suppressed_as_repeat" {
			t.Errorf("recent_peer after its key's first user was pruned: got finding %s, want it re-audited away", f.Rule)
		}
	}
	var list struct {
		Executions []struct {
			ID string `json:"execution_id"`
		} `json:"executions"`
	}
	getJSON(t, s.url+"/api/v1/executions?limit=1000", &list)
	if len(list.Executions) != 401 {
		t.Errorf("executions after the prune: got %d, want the 400 posted and recent_peer", len(list.Executions))
	}
	s.stop(t)
	if after := fileSize(t, db); after > before/4 {
		t.Errorf("file size: got %d bytes after serve pruned, want under a quarter of the %d before", after, before)
	}
}
