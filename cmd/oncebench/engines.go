package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/store/postgres/pgtest"
)

// The engines suite compares SQLite and PostgreSQL under the same load: in
// each run it starts a real server on each engine over a fresh database,
// sends each the same native event batches from several clients and the
// same OTLP JSON requests, then times the same pages on both, one request
// to each in turn. The engines take turns going first from run to run, so
// that drift on the machine falls on both.

type enginesConfig struct {
	runFlags
	postgresURL            string
	events, clients, batch int
	spans                  int // OTLP JSON, framework-shaped runs of 10 spans
	runs, samples          int
}

func enginesFlags(args []string) (enginesConfig, error) {
	var c enginesConfig
	fs := flag.NewFlagSet("oncebench engines", flag.ContinueOnError)
	fs.StringVar(&c.postgresURL, "postgres", os.Getenv(pgtest.EnvURL),
		"a PostgreSQL server whose user may CREATE DATABASE, as postgres://user@host:port/db (default $"+pgtest.EnvURL+"; unset: a throwaway cluster started with initdb and pg_ctl)")
	fs.IntVar(&c.events, "events", 20_000, "native events a run sends to each engine")
	fs.IntVar(&c.clients, "clients", 8, "concurrent clients")
	fs.IntVar(&c.batch, "batch", 100, "events a native request")
	fs.IntVar(&c.spans, "spans", 5_000, "OTLP JSON spans a run sends to each engine, 100 a request")
	fs.IntVar(&c.runs, "runs", 3, "runs; each figure is the median over them")
	fs.IntVar(&c.samples, "samples", 40, "requests of each page a run, to each engine")
	c.register(fs, "SQLite's synchronous setting: normal or full (PostgreSQL's durability is the server's)",
		"a CI-sized run: events, spans and samples divided by 4")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := c.check(); err != nil {
		return c, err
	}
	if c.quick {
		c.events, c.spans, c.samples = c.events/4, c.spans/4, c.samples/4
	}
	if c.events < 1 || c.clients < 1 || c.batch < 1 || c.spans < spansPerTrace || c.runs < 1 || c.samples < 1 {
		return c, errors.New("every size, count and run must be ≥ 1, -spans ≥ 10")
	}
	return c, nil
}

// engineTarget makes a fresh database of one engine for a run: a SQLite
// file, or a PostgreSQL database dropped afterwards. instances servers
// share it (0 is 1): the clients' requests go to them in turn, as behind
// a round-robin load balancer.
type engineTarget struct {
	name      string
	instances int
	make      func(run int) (target string, drop func() error, err error)
}

// engineResult is one engine's figures, a value per run or per request.
type engineResult struct {
	native, otlp                 []float64 // events/s, spans/s
	list, execution, searchPages []time.Duration
}

func runEngines(c enginesConfig, dir string, out io.Writer) error {
	fmt.Fprintln(out)
	targets := []engineTarget{{name: "SQLite", make: func(run int) (string, func() error, error) {
		return filepath.Join(dir, fmt.Sprintf("engines-%d.db", run)), func() error { return nil }, nil
	}}}
	fmt.Fprintf(out, "SQLite: a file in %s, sync %s (a commit is not fsynced; WAL checkpoints are)\n", dir, c.sync)
	cluster, about, err := startPostgres(c.postgresURL)
	if err != nil {
		if pgtest.Required() {
			return err
		}
		fmt.Fprintf(out, "PostgreSQL: skipped: %v\n", err)
	} else {
		defer cluster.Stop()
		defer stopOnSignal(cluster)()
		fmt.Fprintf(out, "PostgreSQL: %s\n", about)
		newDatabase := func(run int) (string, func() error, error) {
			return cluster.CreateDatabase(fmt.Sprintf("oncebench_%d_%d_%d", os.Getpid(), run, time.Now().UnixNano()%1e6))
		}
		targets = append(targets, engineTarget{name: "PostgreSQL", make: newDatabase},
			engineTarget{name: "PostgreSQL, 2 instances", instances: 2, make: newDatabase})
	}

	streams := generate(c.events, c.clients, 4)
	native := requestBodies(streams, c.batch)
	otlpBodies, err := otlpJSONRequests(c.spans, c.clients)
	if err != nil {
		return err
	}
	executions, customers, err := generatedExecutions(streams)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "each run, each engine: %d native events (%d executions) in batches of %d and %d OTLP JSON spans in requests of 100, from %d clients; then %d requests of each page, to each engine in turn; %d runs\n\n",
		c.events, len(executions), c.batch, c.spans, c.clients, c.samples, c.runs)

	results := make([]engineResult, len(targets))
	for run := range c.runs {
		order := make([]int, len(targets))
		for i := range order {
			order[i] = (i + run) % len(targets) // who goes first takes turns
		}
		if err := engineRun(c, run, targets, order, native, otlpBodies, executions, customers, results); err != nil {
			return fmt.Errorf("run %d: %w", run+1, err)
		}
	}
	printEngines(out, targets, results)
	return nil
}

// startPostgres returns the server -postgres names or a throwaway cluster,
// and a sentence saying which.
func startPostgres(serverURL string) (*pgtest.Cluster, string, error) {
	if serverURL != "" {
		// pgtest takes a server's URL from its environment variable.
		if err := os.Setenv(pgtest.EnvURL, serverURL); err != nil {
			return nil, "", err
		}
		cluster, err := pgtest.Start()
		if err != nil {
			return nil, "", err
		}
		u, _ := url.Parse(serverURL)
		return cluster, fmt.Sprintf("the server at %s, with its own durability settings", u.Redacted()), nil
	}
	cluster, err := pgtest.Start()
	if err != nil {
		return nil, "", err
	}
	return cluster, "a throwaway local cluster (initdb, pg_ctl) with fsync=off: like SQLite's sync normal, a commit reaches the kernel, not the disk", nil
}

// stopOnSignal stops a cluster this run started when the run is
// interrupted, which would otherwise leave a server running; the function
// it returns ends the watch.
func stopOnSignal(cluster *pgtest.Cluster) (done func()) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	finished := make(chan struct{})
	go func() {
		select {
		case sig := <-signals:
			cluster.Stop()
			fmt.Fprintf(os.Stderr, "oncebench engines: %v: stopped PostgreSQL\n", sig)
			os.Exit(130)
		case <-finished:
		}
	}()
	return func() {
		signal.Stop(signals)
		close(finished)
	}
}

// engineRun starts a server on a fresh database of each engine, ingests
// into each in order, then times the pages on all of them in turn.
func engineRun(c enginesConfig, run int, targets []engineTarget, order []int, native, otlpBodies [][][]byte,
	executions, customers []string, results []engineResult) error {
	ctx := context.Background()
	servers := make([][]*server, len(targets))
	for i, t := range targets {
		target, drop, err := t.make(run)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		defer func() {
			if err := drop(); err != nil {
				fmt.Fprintln(os.Stderr, "oncebench engines:", err)
			}
		}()
		for range max(1, t.instances) {
			srv, err := startServer(ctx, target, c.sync, true, 1024)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			defer srv.Close()
			servers[i] = append(servers[i], srv)
		}
	}
	client := keepAliveClient(c.clients, 2*time.Minute)
	defer client.CloseIdleConnections()

	for _, i := range order {
		srv, r := servers[i], &results[i]
		rate, err := postNative(client, srv, native, c.events)
		if err != nil {
			return fmt.Errorf("%s, native: %w", targets[i].name, err)
		}
		r.native = append(r.native, rate)
		spansRate, err := postOTLPJSON(client, srv, otlpBodies, c.spans)
		if err != nil {
			return fmt.Errorf("%s, OTLP JSON: %w", targets[i].name, err)
		}
		r.otlp = append(r.otlp, spansRate)
		stored := 0
		if err := srv[0].db.ExportEvents(ctx, func(int64, []byte) error { stored++; return nil }); err != nil {
			return err
		}
		if want := c.events + c.spans; stored != want {
			return fmt.Errorf("%s: events stored: got %d, want %d", targets[i].name, stored, want)
		}
		var commits, conflicts int64
		for _, s := range srv {
			commits, conflicts = commits+s.commits.Load(), conflicts+s.db.WriteConflicts()
		}
		fmt.Fprintf(os.Stderr, "oncebench engines: run %d, %s: %.0f native events/s, %.0f OTLP spans/s, %d commits, %d rolled back for a conflict with another's\n",
			run+1, targets[i].name, rate, spansRate, commits, conflicts)
	}

	for s := range c.samples {
		k := (s*7919 + run*104_729 + 13) % len(executions)
		id, customer := executions[k], customers[k]
		pages := []struct {
			path, want string
			into       func(*engineResult) *[]time.Duration
		}{
			{"/", "exec_", func(r *engineResult) *[]time.Duration { return &r.list }},
			{"/executions/" + url.PathEscape(id), id, func(r *engineResult) *[]time.Duration { return &r.execution }},
			{"/?q=" + url.QueryEscape("customer:"+customer), id[:5], func(r *engineResult) *[]time.Duration { return &r.searchPages }},
		}
		for _, p := range pages {
			for _, i := range order {
				took, err := getPage(client, "http://"+servers[i][0].addr+p.path, p.want)
				if err != nil {
					return fmt.Errorf("%s: %w", targets[i].name, err)
				}
				into := p.into(&results[i])
				*into = append(*into, took)
			}
		}
	}
	return nil
}

// postNative has each client post its bodies in order and returns events
// a second, from the first request to the last answer.
func postNative(client *http.Client, servers []*server, clients [][][]byte, want int) (float64, error) {
	var accepted atomic.Int64
	endpoint := roundRobin(servers, "/api/v1/events")
	elapsed, _, err := postConcurrently(clients, func(body []byte) error {
		data, err := post(client, endpoint(), "application/json", false, body)
		if err != nil {
			return err
		}
		var answer struct {
			Accepted int `json:"accepted"`
		}
		if err := json.Unmarshal(data, &answer); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		accepted.Add(int64(answer.Accepted))
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n := int(accepted.Load()); n != want {
		return 0, fmt.Errorf("accepted: got %d events, want %d", n, want)
	}
	return float64(want) / elapsed.Seconds(), nil
}

// postOTLPJSON posts OTLP JSON requests as an SDK's exporter would and
// returns spans a second.
func postOTLPJSON(client *http.Client, servers []*server, clients [][][]byte, spans int) (float64, error) {
	endpoint := roundRobin(servers, "/v1/traces")
	elapsed, _, err := postConcurrently(clients, func(body []byte) error {
		data, err := post(client, endpoint(), "application/json", false, body)
		if err != nil {
			return err
		}
		answer := ptraceotlp.NewExportResponse()
		if err := answer.UnmarshalJSON(data); err != nil {
			return fmt.Errorf("answer: %w", err)
		}
		if n := answer.PartialSuccess().RejectedSpans(); n != 0 {
			return fmt.Errorf("got %d rejected spans (%s), want 0", n, answer.PartialSuccess().ErrorMessage())
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(spans) / elapsed.Seconds(), nil
}

// roundRobin returns the URL of path on each server in turn, as a
// round-robin load balancer sends requests.
func roundRobin(servers []*server, path string) func() string {
	var n atomic.Int64
	return func() string {
		return "http://" + servers[int(n.Add(1)-1)%len(servers)].addr + path
	}
}

// otlpJSONRequests builds each client's OTLP JSON bodies: framework-shaped
// agent runs (random trace ids, as SDKs send), 100 spans a request.
func otlpJSONRequests(spans, clients int) ([][][]byte, error) {
	const perRequest = 100 / spansPerTrace
	traces := spans / spansPerTrace
	bodies := make([][][]byte, clients)
	base := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	for first := 0; first < traces; first += perRequest {
		req := ptraceotlp.NewExportRequest()
		rs := req.Traces().ResourceSpans().AppendEmpty()
		client := (first / perRequest) % clients
		rs.Resource().Attributes().PutStr("service.name", "billing-agent")
		rs.Resource().Attributes().PutStr("service.instance.id", fmt.Sprintf("worker-%d", client))
		out := rs.ScopeSpans().AppendEmpty().Spans()
		for i := first; i < min(first+perRequest, traces); i++ {
			frameworkRun(out, uint64(i), randomIDs(uint64(i)), base.Add(time.Duration(i)*time.Second))
		}
		b, err := req.MarshalJSON()
		if err != nil {
			return nil, err
		}
		bodies[client] = append(bodies[client], b)
	}
	return bodies, nil
}

// generatedExecutions lists the executions the native events start, with
// each one's customer label, for the pages to ask for.
func generatedExecutions(streams [][][]byte) (ids, customers []string, err error) {
	for _, stream := range streams {
		for _, raw := range stream {
			var ev struct {
				Type        string            `json:"type"`
				ExecutionID string            `json:"execution_id"`
				Labels      map[string]string `json:"labels"`
			}
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, nil, err
			}
			if ev.Type == "execution" && ev.Labels["customer"] != "" {
				ids, customers = append(ids, ev.ExecutionID), append(customers, ev.Labels["customer"])
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil, errors.New("no executions generated")
	}
	return ids, customers, nil
}

// getPage times one page, read to its end; it must answer 200 and hold want.
func getPage(client *http.Client, pageURL, want string) (time.Duration, error) {
	begin := time.Now()
	resp, err := client.Get(pageURL)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(begin)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: got %s, want 200", pageURL, resp.Status)
	}
	if !strings.Contains(string(body), want) {
		return 0, fmt.Errorf("GET %s: the page does not hold %q", pageURL, want)
	}
	return took, nil
}

func printEngines(out io.Writer, targets []engineTarget, results []engineResult) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "engine\tnative events/s\tOTLP JSON spans/s\tlist page ms\texecution page ms\tsearch ms\t")
	row := func(name string, r engineResult) {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t\n", name, median(r.native), median(r.otlp),
			millis(medianDuration(r.list)), millis(medianDuration(r.execution)), millis(medianDuration(r.searchPages)))
	}
	for i, t := range targets {
		row(t.name, results[i])
	}
	if len(targets) == 3 {
		s, p, p2 := results[0], results[1], results[2]
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", "PostgreSQL / SQLite", median(p.native)/median(s.native), median(p.otlp)/median(s.otlp),
			ratioOf(p.list, s.list), ratioOf(p.execution, s.execution), ratioOf(p.searchPages, s.searchPages))
		// Write scaling: what a second instance adds (1.00: nothing, as
		// long as every commit takes the database-wide lock).
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", "PostgreSQL 2 instances / 1", median(p2.native)/median(p.native), median(p2.otlp)/median(p.otlp),
			ratioOf(p2.list, p.list), ratioOf(p2.execution, p.execution), ratioOf(p2.searchPages, p.searchPages))
	}
	tw.Flush()
	fmt.Fprintln(out, "\ningest: median of the runs; pages: median of every request over the runs, to the end of the body; search: the list filtered by a customer label")
}

func ratioOf(a, b []time.Duration) float64 {
	return float64(medianDuration(a)) / float64(medianDuration(b))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianDuration(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
