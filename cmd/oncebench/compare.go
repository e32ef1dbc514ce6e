package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/store/sqlite"
)

// The compare suite measures oncetrace's OTLP/HTTP ingest against Jaeger's
// with Badger storage (embedded, on disk): both run as child processes on
// 127.0.0.1, each fresh for every run over a new directory, and get the
// same requests — agent runs of ten spans with random trace ids, 100 spans
// a request, half oncetrace-shaped and half as the Vercel AI SDK exports —
// from the same clients. Runs alternate between the two servers, and each
// figure is the median of the runs. Jaeger is built from the separate module
// in cmd/oncebench/jaeger (minutes, once; the binary is cached).

type compareConfig struct {
	runFlags
	spans, runs int
	conns       []int
	encodings   []string
	jaeger      string // binary; built when empty
}

// The goals of issue 14, printed next to the figures they judge.
const (
	goalRatio     = 1.5
	goalP99       = 100 * time.Millisecond
	goalCPU       = 40 * time.Microsecond
	goalDiskBytes = 700
)

func compareFlags(args []string) (compareConfig, error) {
	var c compareConfig
	fs := flag.NewFlagSet("oncebench compare", flag.ContinueOnError)
	fs.IntVar(&c.spans, "spans", 100_000, "spans a run (enough that Jaeger's batch queue fills and it answers at the pace it writes)")
	fs.IntVar(&c.runs, "runs", 3, "runs of each server in each configuration (the median is shown)")
	conns := fs.String("conns", "4,8", "comma-separated connection counts")
	encodings := fs.String("encodings", "json,protobuf", "comma-separated request encodings: json, protobuf")
	fs.StringVar(&c.jaeger, "jaeger", "", "a Jaeger binary to use (default: build cmd/oncebench/jaeger's into the cache next to GOCACHE, once)")
	c.register(fs, "oncetrace's SQLite synchronous setting: normal or full", "a CI-sized run: -spans divided by 10, one run each")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := c.check(); err != nil {
		return c, err
	}
	if c.quick {
		c.spans /= 10
		c.runs = 1
	}
	for f := range strings.SplitSeq(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return c, fmt.Errorf("-conns: want counts ≥ 1, not %q", f)
		}
		c.conns = append(c.conns, n)
	}
	for f := range strings.SplitSeq(*encodings, ",") {
		f = strings.TrimSpace(f)
		if f != "json" && f != "protobuf" {
			return c, fmt.Errorf("-encodings: want json or protobuf, not %q", f)
		}
		c.encodings = append(c.encodings, f)
	}
	if c.spans < 100 || c.runs < 1 {
		return c, errors.New("-spans must be ≥ 100 and -runs ≥ 1")
	}
	return c, nil
}

// peer is a server under measurement, started fresh for each run.
type peer interface {
	start(dir string) (*child, error)
	name() string
	// verify checks, once the server has stopped, that it stored what was
	// sent: spans, of which effectEvents carried an effect span event.
	verify(c *child, spans, effectEvents int) error
}

// child is a running server process and where it answers.
type child struct {
	cmd     *exec.Cmd
	exited  chan error
	log     string
	dataDir string // what "bytes on disk" measures
	otlpURL string // POST /v1/traces
	// stored counts the spans written so far, for a server that answers
	// before it writes; nil when the last answer means all are stored.
	stored func() (int, error)
}

// runResult is one run's figures.
type runResult struct {
	ackRate, storedRate float64 // spans a second, to the last answer and to the last span stored
	p99                 time.Duration
	cpuPerSpan          time.Duration
	diskPerSpan         float64
	rss                 int64
}

func runCompare(c compareConfig, dir string, out io.Writer) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	jaegerBin := c.jaeger
	if jaegerBin == "" {
		if jaegerBin, err = buildJaeger(root, out); err != nil {
			return err
		}
	}
	oncetraceBin := filepath.Join(dir, "oncetrace")
	if b, err := exec.Command("go", "build", "-o", oncetraceBin, "./cmd/oncetrace").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/oncetrace: %v\n%s", err, b)
	}
	peers := []peer{oncetracePeer{bin: oncetraceBin, sync: c.sync}, jaegerPeer{bin: jaegerBin}}

	fmt.Fprintf(out, "oncetrace (serve, SQLite, -sync %s) against Jaeger %s (Badger, embedded, on disk), both child processes on 127.0.0.1\n", c.sync, jaegerVersion(root))
	fmt.Fprintf(out, "%d spans a run in requests of 100 (agent runs of %d spans, random trace ids, half oncetrace-shaped and half as the Vercel AI SDK exports); %d interleaved runs a server, medians (min–max)\n", c.spans, spansPerTrace, c.runs)
	fmt.Fprintln(out, "oncetrace answers a request after its commit; Jaeger answers before it writes (its batch processor queues spans), so Jaeger's spans/s up to the last span stored is shown too.")
	fmt.Fprintln(out, "CPU is the server process's user+system time from the first request to the last span stored; disk is the data directory after a clean shutdown; RSS just before it.")

	type row struct {
		encoding string
		conns    int
		results  [2][]runResult
	}
	var rows []row
	for _, enc := range c.encodings {
		for _, conns := range c.conns {
			bodies, spans, effects, err := compareRequests(c.spans, conns, enc)
			if err != nil {
				return err
			}
			r := row{encoding: enc, conns: conns}
			fmt.Fprintf(out, "\n%s, %d connections:", enc, conns)
			for i := range c.runs {
				for p, pe := range peers {
					runDir := filepath.Join(dir, fmt.Sprintf("%s-%s-%d-%d", pe.name(), enc, conns, i))
					res, err := measurePeer(pe, runDir, bodies, spans, effects, enc)
					if err != nil {
						return fmt.Errorf("%s, %s, %d connections: %w", pe.name(), enc, conns, err)
					}
					if c.dir == "" { // a temporary directory: keep the disk from filling over the runs
						os.RemoveAll(runDir)
					}
					r.results[p] = append(r.results[p], res)
					fmt.Fprintf(out, " %s %.0f", pe.name(), res.ackRate)
				}
			}
			fmt.Fprintln(out, " spans/s")
			rows = append(rows, r)
		}
	}

	fmt.Fprintf(out, "\n%-9s %5s  %-22s %22s %22s %7s  %s\n", "encoding", "conns", "figure", "oncetrace", "jaeger", "ratio", "goal (oncetrace)")
	for _, r := range rows {
		o, j := r.results[0], r.results[1]
		line := func(figure string, of, jf func(runResult) float64, format string, goal string, met func(float64, float64) bool) {
			om, jm := runMedian(o, of), runMedian(j, jf)
			verdict := ""
			if goal != "" {
				verdict = goal + ": not met"
				if met(om, jm) {
					verdict = goal + ": met"
				}
			}
			fmt.Fprintf(out, "%-9s %5d  %-22s %22s %22s %7.2f  %s\n", r.encoding, r.conns, figure,
				spread(o, of, format), spread(j, jf, format), om/jm, verdict)
		}
		ack := func(x runResult) float64 { return x.ackRate }
		line("spans/s (answered)", ack, ack, "%.0f", fmt.Sprintf("≥ %.1f× Jaeger", goalRatio),
			func(om, jm float64) bool { return om >= goalRatio*jm })
		stored := func(x runResult) float64 { return x.storedRate }
		line("spans/s (stored)", stored, stored, "%.0f", "", nil)
		p99 := func(x runResult) float64 { return float64(x.p99) / float64(time.Millisecond) }
		line("p99 latency, ms", p99, p99, "%.1f", fmt.Sprintf("≤ %d ms", goalP99.Milliseconds()),
			func(om, _ float64) bool { return om <= float64(goalP99.Milliseconds()) })
		cpu := func(x runResult) float64 { return float64(x.cpuPerSpan) / float64(time.Microsecond) }
		line("CPU µs/span", cpu, cpu, "%.1f", fmt.Sprintf("≤ %d µs", goalCPU.Microseconds()),
			func(om, _ float64) bool { return om <= float64(goalCPU.Microseconds()) })
		disk := func(x runResult) float64 { return x.diskPerSpan }
		line("bytes on disk/span", disk, disk, "%.0f", fmt.Sprintf("≤ %d B", goalDiskBytes),
			func(om, _ float64) bool { return om <= goalDiskBytes })
		rss := func(x runResult) float64 { return float64(x.rss) / (1 << 20) }
		line("RSS at end, MiB", rss, rss, "%.0f", "", nil)
	}
	return nil
}

// runMedian is the middle of the runs' figures (the mean of the middle two
// for an even count).
func runMedian(rs []runResult, f func(runResult) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// spread formats the median and, for more than one run, the range.
func spread(rs []runResult, f func(runResult) float64, format string) string {
	m := fmt.Sprintf(format, runMedian(rs, f))
	if len(rs) == 1 {
		return m
	}
	lo, hi := f(rs[0]), f(rs[0])
	for _, r := range rs[1:] {
		lo, hi = min(lo, f(r)), max(hi, f(r))
	}
	return fmt.Sprintf("%s ("+format+"–"+format+")", m, lo, hi)
}

// compareRequests builds each connection's bodies: 100 spans a request, ten
// agent runs alternating between the two shapes, every run's trace id
// random. The same bodies go to both servers.
func compareRequests(spans, conns int, encoding string) (bodies [][][]byte, total, effects int, err error) {
	return compareRequestsWith(spans, conns, encoding, randomIDs)
}

// compareRequestsWith is compareRequests with trace and span ids from ids.
func compareRequestsWith(spans, conns int, encoding string, ids func(uint64) runIDs) (bodies [][][]byte, total, effects int, err error) {
	const perRequest = 100 / spansPerTrace
	traces := spans / spansPerTrace
	bodies = make([][][]byte, conns)
	base := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	for first := 0; first < traces; first += perRequest {
		req := ptraceotlp.NewExportRequest()
		rs := req.Traces().ResourceSpans().AppendEmpty()
		client := (first / perRequest) % conns
		rs.Resource().Attributes().PutStr("service.name", "billing-agent")
		rs.Resource().Attributes().PutStr("service.instance.id", fmt.Sprintf("worker-%d", client))
		out := rs.ScopeSpans().AppendEmpty().Spans()
		for i := first; i < min(first+perRequest, traces); i++ {
			run := agentRun
			if i%2 == 1 {
				run = frameworkRun
			}
			effects += run(out, uint64(i), ids(uint64(i)), base.Add(time.Duration(i)*time.Second))
			total += spansPerTrace
		}
		var b []byte
		if encoding == "json" {
			b, err = req.MarshalJSON()
		} else {
			b, err = req.MarshalProto()
		}
		if err != nil {
			return nil, 0, 0, err
		}
		bodies[client] = append(bodies[client], b)
	}
	return bodies, total, effects, nil
}

// measurePeer starts a fresh server over dir, sends every body, waits until
// every span is stored, and stops the server.
func measurePeer(pe peer, dir string, clients [][][]byte, spans, effects int, encoding string) (res runResult, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	ch, err := pe.start(dir)
	if err != nil {
		return res, err
	}
	stopped := false
	defer func() {
		if !stopped {
			ch.stop()
		}
		if err != nil {
			err = fmt.Errorf("%w (server log: %s)", err, tail(ch.log))
		}
	}()
	contentType := "application/x-protobuf"
	if encoding == "json" {
		contentType = "application/json"
	}
	httpClient := keepAliveClient(len(clients), 2*time.Minute)
	defer httpClient.CloseIdleConnections()
	pid := ch.cmd.Process.Pid

	var mu sync.Mutex
	var latencies []time.Duration
	cpuStart := childCPU(pid)
	begin := time.Now()
	elapsed, _, err := postConcurrently(clients, func(body []byte) error {
		sent := time.Now()
		data, err := post(httpClient, ch.otlpURL, contentType, false, body)
		if err != nil {
			return err
		}
		took := time.Since(sent)
		mu.Lock()
		latencies = append(latencies, took)
		mu.Unlock()
		answer := ptraceotlp.NewExportResponse()
		if encoding == "json" {
			err = answer.UnmarshalJSON(data)
		} else {
			err = answer.UnmarshalProto(data)
		}
		if err != nil {
			return fmt.Errorf("answer: %w", err)
		}
		if n := answer.PartialSuccess().RejectedSpans(); n != 0 {
			return fmt.Errorf("got %d rejected spans (%s), want 0", n, answer.PartialSuccess().ErrorMessage())
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	// Jaeger answers before it writes: wait for its exporter to have
	// written every span. oncetrace has stored them all by its last answer.
	deadline := time.Now().Add(2 * time.Minute)
	for ch.stored != nil {
		n, err := ch.stored()
		if err != nil {
			return res, err
		}
		if n >= spans {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("spans stored after 2 minutes: %d, want %d", n, spans)
		}
		time.Sleep(20 * time.Millisecond)
	}
	toStored := time.Since(begin)
	cpu := childCPU(pid) - cpuStart
	res.rss = childRSS(pid)
	stopped = true
	if err := ch.stop(); err != nil {
		return res, fmt.Errorf("clean shutdown: %w", err)
	}
	disk, err := diskUsage(ch.dataDir)
	if err != nil {
		return res, err
	}
	if err := pe.verify(ch, spans, effects); err != nil {
		return res, err
	}
	slices.Sort(latencies)
	res.ackRate = float64(spans) / elapsed.Seconds()
	res.storedRate = float64(spans) / toStored.Seconds()
	res.p99 = latencies[(len(latencies)*99+99)/100-1]
	res.cpuPerSpan = cpu / time.Duration(spans)
	res.diskPerSpan = float64(disk) / float64(spans)
	return res, nil
}

// oncetracePeer runs `oncetrace serve` over a new SQLite file.
type oncetracePeer struct {
	bin  string
	sync sqlite.Sync
}

func (oncetracePeer) name() string { return "oncetrace" }

func (o oncetracePeer) start(dir string) (*child, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o755); err != nil {
		return nil, err
	}
	ch, err := startChild(filepath.Join(dir, "serve.log"), o.bin, "serve", "--addr", addr,
		"--db", filepath.Join(dataDir, "oncetrace.db"), "--sync", string(o.sync))
	if err != nil {
		return nil, err
	}
	ch.dataDir, ch.otlpURL = dataDir, "http://"+addr+"/v1/traces"
	if err := waitReady(ch, "http://"+addr+"/healthz"); err != nil {
		ch.stop()
		return nil, err
	}
	return ch, nil
}

// verify counts the events in the database: one a span, and one more a
// span event reporting an effect.
func (oncetracePeer) verify(ch *child, spans, effectEvents int) error {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(ch.dataDir, "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		return err
	}
	defer db.Close()
	stored := 0
	if err := db.ExportEvents(ctx, func(int64, []byte) error { stored++; return nil }); err != nil {
		return err
	}
	if want := spans + effectEvents; stored != want {
		return fmt.Errorf("events stored: got %d, want %d", stored, want)
	}
	return nil
}

// jaegerPeer runs Jaeger with Badger storage over dir, every listener on
// 127.0.0.1 (its default configuration listens on all interfaces).
type jaegerPeer struct{ bin string }

func (jaegerPeer) name() string { return "jaeger" }

// jaegerConfig is Jaeger's configuration: one Badger store (no archive),
// each listener on a port of its own on 127.0.0.1; %s are, in order, the
// metrics port, the Badger directory twice, the query HTTP and gRPC
// addresses, the health check address and the OTLP gRPC and HTTP addresses.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %s
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      bench_store:
        badger:
          directories:
            keys: %q
            values: %q
          ephemeral: false
          ttl:
            spans: 48h
  jaeger_query:
    storage:
      traces: bench_store
    http:
      endpoint: %s
    grpc:
      endpoint: %s
  healthcheckv2:
    use_v2: true
    http:
      endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: bench_store
`

func (j jaegerPeer) start(dir string) (*child, error) {
	addrs := make([]string, 6)
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	_, metricsPort, _ := net.SplitHostPort(addrs[0])
	dataDir := filepath.Join(dir, "badger")
	config := fmt.Sprintf(jaegerConfig, metricsPort, dataDir, dataDir, addrs[1], addrs[2], addrs[3], addrs[4], addrs[5])
	configPath := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		return nil, err
	}
	ch, err := startChild(filepath.Join(dir, "jaeger.log"), j.bin, "--config", configPath)
	if err != nil {
		return nil, err
	}
	ch.dataDir, ch.otlpURL = dataDir, "http://"+addrs[5]+"/v1/traces"
	metricsURL := "http://" + addrs[0] + "/metrics"
	ch.stored = func() (int, error) { return jaegerSpansStored(metricsURL) }
	if err := waitReady(ch, "http://"+addrs[3]+"/status"); err != nil {
		ch.stop()
		return nil, err
	}
	return ch, nil
}

// verify has nothing left to check: measurePeer waited until Jaeger's
// exporter had written every span.
func (jaegerPeer) verify(*child, int, int) error { return nil }

// jaegerSpansStored reads the spans Jaeger's storage exporter has written
// from its own metrics.
func jaegerSpansStored(metricsURL string) (int, error) {
	resp, err := http.Get(metricsURL)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	total := 0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "otelcol_exporter_sent_spans") || !strings.Contains(line, `exporter="jaeger_storage_exporter"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics: %q: %w", line, err)
		}
		total += int(v)
	}
	return total, sc.Err()
}

// startChild starts bin with its output to logPath.
func startChild(logPath, bin string, args ...string) (*child, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	ch := &child{cmd: cmd, exited: make(chan error, 1), log: logPath}
	go func() {
		ch.exited <- cmd.Wait()
		logFile.Close()
	}()
	return ch, nil
}

// stop asks the server to shut down cleanly, as an operator would, and
// kills it after 30 seconds.
func (ch *child) stop() error {
	_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-ch.exited:
		return err
	case <-time.After(30 * time.Second):
		_ = ch.cmd.Process.Kill()
		<-ch.exited
		return errors.New("did not stop within 30 seconds of SIGTERM; killed")
	}
}

// waitReady polls url until it answers 200, for up to a minute.
func waitReady(ch *child, url string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-ch.exited:
			ch.exited <- err
			return fmt.Errorf("exited before it was ready: %v: %s", err, tail(ch.log))
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after a minute: %s", url, tail(ch.log))
}

// freeAddr is a 127.0.0.1 address with a port no one listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// childCPU is the user and system CPU process pid has used so far, from
// /proc/PID/stat (clock ticks, 100 a second on Linux); -1 elsewhere.
func childCPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	return statCPU(stat)
}

// childRSS is process pid's resident set in bytes (VmRSS), or -1.
func childRSS(pid int) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// diskUsage is what du reports for dir: the blocks its files take, which
// for Badger's preallocated files is less than their size.
func diskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// tail is the end of a log file, for an error.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// moduleRoot is the directory of the oncetrace module being measured.
func moduleRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(b))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run oncebench compare inside the oncetrace module (e.g. make bench-compare)")
	}
	return filepath.Dir(gomod), nil
}

// jaegerVersion is the version cmd/oncebench/jaeger/go.mod requires.
func jaegerVersion(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "cmd", "oncebench", "jaeger", "go.mod"))
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "github.com/jaegertracing/jaeger" {
			return f[1]
		}
	}
	return "unknown"
}

// buildJaeger returns the cached Jaeger binary for the version the module
// requires, building it first if it is missing (about five minutes).
func buildJaeger(root string, out io.Writer) (string, error) {
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOCACHE: %w", err)
	}
	bin := filepath.Join(filepath.Dir(strings.TrimSpace(string(gocache))), "oncetrace-jaeger", "jaeger-"+jaegerVersion(root))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	fmt.Fprintf(out, "building Jaeger into %s (once; about five minutes)\n", bin)
	build := exec.Command("go", "build", "-o", bin+".tmp", "github.com/jaegertracing/jaeger/cmd/jaeger")
	build.Dir = filepath.Join(root, "cmd", "oncebench", "jaeger")
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building Jaeger: %v\n%s", err, b)
	}
	return bin, os.Rename(bin+".tmp", bin)
}
