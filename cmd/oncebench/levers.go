package main

import (
	"bytes"
	"compress/flate"
	"context"
	"database/sql"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// leversConfig is oncebench levers' flags.
type leversConfig struct {
	runFlags
	spans  int
	rounds int
}

func leversFlags(args []string) (leversConfig, error) {
	c := leversConfig{}
	fs := flag.NewFlagSet("oncebench levers", flag.ContinueOnError)
	c.register(fs, "SQLite synchronous mode", "-spans divided by 10")
	fs.IntVar(&c.spans, "spans", 100_000, "spans in each layout's run (compare's requests: 100 a request, half of each shape)")
	fs.IntVar(&c.rounds, "rounds", 3, "interleaved runs of every layout; the medians are printed")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.quick {
		c.spans /= 10
	}
	if c.spans < 1000 {
		return c, fmt.Errorf("-spans wants 1,000 or more")
	}
	if c.rounds < 1 {
		return c, fmt.Errorf("-rounds wants 1 or more")
	}
	return c, c.check()
}

// logEvent is what the event log stores of a mapped event: the mapping is
// done before the layouts are timed, so their figures are storage alone.
type logEvent struct {
	id, typ, entity, executionID string
	body                         []byte
}

// logShape is one layout of the event log. The zero value is today's
// (0001_init.sql, 0006_retention.sql): seq is already the rowid, in arrival
// order; the TEXT id carries a unique index (dedupe); entity an index (the
// writer folding an entity's events, prune); execution_id one (retention,
// placeholder checks, the live feed of one execution). No page's render
// reads the log through any of them.
type logShape struct {
	hashID      bool // dedupe on an 8-byte hash of the id, UNIQUE, instead of the TEXT id's index
	dropID      bool // with hashID: no id column (the canonical body holds the id)
	hashKeys    bool // entity and execution_id indexed by 8-byte hashes; their texts stay in the row
	blocks      bool // bodies in one deflated block a request; rows hold (block, at, size)
	level       int  // flate level of the blocks
	noEntity    bool // no entity index
	noExecution bool // no execution_id index
	// perRequest: no row an event. A request is one row (its events'
	// bodies deflated, each behind its length); an event is an entry of
	// the dedupe index (id hash -> request) and one of the entity index
	// (entity hash -> request), both fixed-width. Its type, entity and
	// execution are read from its body.
	perRequest bool
}

// schema is the shape's CREATE statements.
func (sh logShape) schema() []string {
	if sh.perRequest {
		return []string{
			`CREATE TABLE requests (seq INTEGER PRIMARY KEY, events INTEGER NOT NULL, bodies BLOB NOT NULL, received_at INTEGER NOT NULL)`,
			`CREATE TABLE event_ids (id_hash INTEGER PRIMARY KEY, request INTEGER NOT NULL) WITHOUT ROWID`,
			`CREATE TABLE event_entities (entity_hash INTEGER NOT NULL, request INTEGER NOT NULL, PRIMARY KEY (entity_hash, request)) WITHOUT ROWID`,
		}
	}
	var cols []string
	add := func(c ...string) { cols = append(cols, c...) }
	add("seq INTEGER PRIMARY KEY")
	if sh.hashID {
		add("id_hash INTEGER NOT NULL UNIQUE")
		if !sh.dropID {
			add("id TEXT NOT NULL")
		}
	} else {
		add("id TEXT NOT NULL UNIQUE")
	}
	add("type TEXT NOT NULL", "entity TEXT NOT NULL", "execution_id TEXT NOT NULL")
	if sh.hashKeys {
		add("entity_hash INTEGER NOT NULL", "execution_hash INTEGER NOT NULL")
	}
	if sh.blocks {
		add("block INTEGER NOT NULL", "at INTEGER NOT NULL", "size INTEGER NOT NULL")
	} else {
		add("body TEXT NOT NULL")
	}
	add("received_at INTEGER NOT NULL")
	stmts := []string{`CREATE TABLE events (` + strings.Join(cols, ", ") + `)`}
	if sh.blocks {
		stmts = append(stmts, `CREATE TABLE blocks (block INTEGER PRIMARY KEY, bodies BLOB NOT NULL)`)
	}
	entity, execution := "entity", "execution_id"
	if sh.hashKeys {
		entity, execution = "entity_hash", "execution_hash"
	}
	if !sh.noEntity {
		stmts = append(stmts, `CREATE INDEX events_entity ON events (`+entity+`)`)
	}
	if !sh.noExecution {
		stmts = append(stmts, `CREATE INDEX events_execution ON events (`+execution+`)`)
	}
	return stmts
}

// leverLayout is one way of storing the event log and the WAL's automatic
// checkpoint under it.
type leverLayout struct {
	name           string
	shape          logShape
	autoCheckpoint int // pages; the store's own checkpointer runs at 1,000
}

// leverLayouts are the baseline, each lever alone, then the levers that
// pay together. Every layout inserts as the store does (InsertEvents:
// multi-row, ON CONFLICT DO NOTHING RETURNING, 256 rows a statement).
func leverLayouts() []leverLayout {
	hashed := logShape{hashID: true, dropID: true}
	blocks := hashed
	blocks.blocks, blocks.level = true, flate.BestSpeed
	all := blocks
	all.hashKeys, all.noExecution = true, true
	bare := blocks
	bare.noEntity, bare.noExecution = true, true
	return []leverLayout{
		{"(a) baseline: today's events table, TEXT id UNIQUE, 2 indexes", logShape{}, 1000},
		{"(b) 8-byte hash of the id UNIQUE instead of the TEXT id", logShape{hashID: true}, 1000},
		{"(b') the same, id column dropped (the body holds it)", hashed, 1000},
		{"(b'') entity, execution_id indexed by 8-byte hashes", logShape{hashKeys: true}, 1000},
		{"(c) (b') + bodies in a flate block a request (speed)", blocks, 1000},
		{"(c') (b') + bodies in a flate block a request (default)", logShape{hashID: true, dropID: true, blocks: true, level: flate.DefaultCompression}, 1000},
		{"(d) no events_execution index", logShape{noExecution: true}, 1000},
		{"(d') no events_execution, no events_entity index", logShape{noExecution: true, noEntity: true}, 1000},
		{"(e) wal_autocheckpoint 250 pages", logShape{}, 250},
		{"(e') wal_autocheckpoint 4,000 pages", logShape{}, 4000},
		{"(e'') wal_autocheckpoint 16,000 pages", logShape{}, 16000},
		{"(b')+(b'')+(c)+(d): hashes, blocks, entity index", all, 1000},
		{"(b')+(b'')+(c)+(d), wal_autocheckpoint 16,000 pages", all, 16000},
		{"(b')+(c)+(d'): hash, blocks, no other index", bare, 1000},
		{"(f) a row a request, fixed-width id and entity indexes", logShape{perRequest: true, level: flate.BestSpeed}, 1000},
		{"(f), wal_autocheckpoint 16,000 pages", logShape{perRequest: true, level: flate.BestSpeed}, 16000},
	}
}

// leverStore is one layout's open transaction and the writer state it
// keeps across commits.
type leverStore struct {
	tx        *sql.Tx
	nextBlock int64
	deflate   *flate.Writer
	raw       bytes.Buffer // a request's bodies, concatenated
	packed    bytes.Buffer // the same, deflated
	inserted  int          // events stored (not duplicates), to check every layout stored all
}

// chunks calls fn with the events of requests in runs of 256, then powers of
// two, as InsertEvents does, so each statement's text is one of a few.
func chunks(events []logEvent, fn func([]logEvent) error) error {
	for start := 0; start < len(events); {
		n := maxLeverRows
		for n > len(events)-start {
			n /= 2
		}
		if err := fn(events[start : start+n]); err != nil {
			return err
		}
		start += n
	}
	return nil
}

const maxLeverRows = 256

func rowsQuery(head, row string, n int, tail string) string {
	var b strings.Builder
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(tail)
	return b.String()
}

// returning runs a multi-row INSERT … RETURNING and counts the rows stored.
func (s *leverStore) returning(query string, args []any) error {
	rows, err := s.tx.Query(query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key any // the TEXT id or its hash
		var seq int64
		if err := rows.Scan(&key, &seq); err != nil {
			return err
		}
		s.inserted++
	}
	return rows.Err()
}

func flatten(requests [][]logEvent) []logEvent {
	var all []logEvent
	for _, r := range requests {
		all = append(all, r...)
	}
	return all
}

// idHash is a dedupe or lookup key: FNV-1a, 64 bits, as a signed integer
// (SQLite's). Two ids sharing one (2^-64 a pair) would need a second probe
// checked against the body's id; these runs never meet one.
func idHash(id string) int64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return int64(h.Sum64())
}

// insert stores one commit's requests in the shape's table as InsertEvents
// does: multi-row INSERTs, ON CONFLICT DO NOTHING RETURNING the rows
// stored. With blocks, a request's rows go first and its block after, so a
// request whose events were all stored already (a retry) leaves none.
func (s *leverStore) insert(sh logShape, requests [][]logEvent, at int64) error {
	if sh.perRequest {
		return s.insertRequests(sh, requests, at)
	}
	var cols []string
	if sh.hashID {
		cols = append(cols, "id_hash")
		if !sh.dropID {
			cols = append(cols, "id")
		}
	} else {
		cols = append(cols, "id")
	}
	cols = append(cols, "type", "entity", "execution_id")
	if sh.hashKeys {
		cols = append(cols, "entity_hash", "execution_hash")
	}
	if sh.blocks {
		cols = append(cols, "block", "at", "size")
	} else {
		cols = append(cols, "body")
	}
	cols = append(cols, "received_at")
	row := "(?" + strings.Repeat(", ?", len(cols)-1) + ")"
	key := cols[0]
	if sh.blocks && s.deflate == nil {
		w, err := flate.NewWriter(&s.packed, sh.level)
		if err != nil {
			return err
		}
		s.deflate = w
	}
	batches := requests
	if !sh.blocks {
		batches = [][]logEvent{flatten(requests)}
	}
	for _, evs := range batches {
		s.raw.Reset()
		before := s.inserted
		err := chunks(evs, func(chunk []logEvent) error {
			args := make([]any, 0, len(cols)*len(chunk))
			for _, ev := range chunk {
				if sh.hashID {
					args = append(args, idHash(ev.id))
					if !sh.dropID {
						args = append(args, ev.id)
					}
				} else {
					args = append(args, ev.id)
				}
				args = append(args, ev.typ, ev.entity, ev.executionID)
				if sh.hashKeys {
					args = append(args, idHash(ev.entity), idHash(ev.executionID))
				}
				if sh.blocks {
					args = append(args, s.nextBlock, s.raw.Len(), len(ev.body))
					s.raw.Write(ev.body)
				} else {
					args = append(args, string(ev.body))
				}
				args = append(args, at)
			}
			return s.returning(rowsQuery(`INSERT INTO events (`+strings.Join(cols, ", ")+`) VALUES `, row, len(chunk),
				` ON CONFLICT (`+key+`) DO NOTHING RETURNING `+key+`, seq`), args)
		})
		if err != nil {
			return err
		}
		if !sh.blocks || s.inserted == before {
			continue
		}
		s.packed.Reset()
		s.deflate.Reset(&s.packed)
		if _, err := s.deflate.Write(s.raw.Bytes()); err != nil {
			return err
		}
		if err := s.deflate.Close(); err != nil {
			return err
		}
		if _, err := s.tx.Exec(`INSERT INTO blocks (block, bodies) VALUES (?, ?)`, s.nextBlock, s.packed.Bytes()); err != nil {
			return err
		}
		s.nextBlock++
	}
	return nil
}

// leverFigure is one layout's run.
type leverFigure struct {
	cpu, wall time.Duration
	bytes     int64
	events    int
	read      time.Duration // wall time to read one event's body by its id
}

// runLayout stores every commit's requests into a fresh file at path with
// layout l, as the writer would: one IMMEDIATE transaction a commit, WAL,
// the store's pragmas and incremental auto-vacuum.
func runLayout(ctx context.Context, c leversConfig, l leverLayout, path string, commits [][][]logEvent) (f leverFigure, err error) {
	runtime.GC()
	beginCPU, begin := processCPU(), time.Now()
	db, err := sql.Open("sqlite", rawDSN(path, c.sync)+"&_pragma="+fmt.Sprintf("wal_autocheckpoint(%d)", l.autoCheckpoint))
	if err != nil {
		return f, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, stmt := range append([]string{`PRAGMA auto_vacuum = INCREMENTAL`, `VACUUM`}, l.shape.schema()...) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return f, fmt.Errorf("%s: %w", stmt, err)
		}
	}
	s := &leverStore{}
	at := time.Now().UnixNano()
	for _, requests := range commits {
		s.tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			return f, err
		}
		if err := s.insert(l.shape, requests, at); err != nil {
			s.tx.Rollback()
			return f, err
		}
		if err := s.tx.Commit(); err != nil {
			return f, err
		}
	}
	if err := db.Close(); err != nil {
		return f, err
	}
	f.cpu, f.wall, f.events = cpuSince(beginCPU), time.Since(begin), s.inserted
	for _, p := range []string{path, path + "-wal"} {
		if info, err := os.Stat(p); err == nil {
			f.bytes += info.Size()
		}
	}
	return f, nil
}

// leverCommits maps compare's requests to the log's rows, floorGroup
// requests a commit, and returns them with the number of events.
func leverCommits(bodies [][]byte) ([][][]logEvent, int, error) {
	var commits [][][]logEvent
	events := 0
	for i, b := range bodies {
		mapped, err := decodeAndMap(b)
		if err != nil {
			return nil, 0, err
		}
		evs := make([]logEvent, len(mapped))
		for j, ev := range mapped {
			evs[j] = logEvent{ev.ID, string(ev.Type), ev.Entity(), ev.ExecutionID(), ev.Body}
		}
		events += len(evs)
		if i%floorGroup == 0 {
			commits = append(commits, nil)
		}
		commits[len(commits)-1] = append(commits[len(commits)-1], evs)
	}
	return commits, events, nil
}

// runLevers stores compare's requests (random trace ids) into the event
// log laid out in each way, one lever at a time against today's layout,
// interleaved round by round, and prints the medians and their ratio to
// the baseline's.
func runLevers(c leversConfig, dir string, out io.Writer) error {
	ctx := context.Background()
	bodies, spans, _, err := compareRequestsWith(c.spans, 1, "protobuf", randomIDs)
	if err != nil {
		return err
	}
	commits, events, err := leverCommits(bodies[0])
	if err != nil {
		return err
	}
	var all, sample []logEvent // sample: leverReads events spread over the run
	for _, c := range commits {
		all = append(all, flatten(c)...)
	}
	for i := 0; i < len(all); i += max(1, len(all)/leverReads) {
		sample = append(sample, all[i])
	}
	layouts := leverLayouts()
	figures := make([][]leverFigure, len(layouts))
	for r := range c.rounds {
		for i, l := range layouts {
			path := filepath.Join(dir, fmt.Sprintf("levers-%d-%d.db", r, i))
			f, err := runLayout(ctx, c, l, path, commits)
			if err != nil {
				return fmt.Errorf("%s: %w", l.name, err)
			}
			if f.events != events {
				return fmt.Errorf("%s: stored %d events, want %d", l.name, f.events, events)
			}
			if f.read, err = timeReads(ctx, c, l.shape, path, sample); err != nil {
				return fmt.Errorf("%s: %w", l.name, err)
			}
			figures[i] = append(figures[i], f)
			os.Remove(path)
		}
	}

	fmt.Fprintf(out, "compare's requests (%d spans, %d events, 100 spans a request, half oncetrace-shaped, half Vercel AI SDK-shaped, random trace ids),\n", spans, events)
	fmt.Fprintf(out, "decoded and mapped beforehand (not counted), stored from one goroutine into raw SQLite tables, %d requests a commit, -sync %s,\n", floorGroup, c.sync)
	fmt.Fprintf(out, "every layout on a fresh file, %d interleaved rounds, medians. CPU and time include opening, the schema and the close's checkpoint;\n", c.rounds)
	fmt.Fprintln(out, "bytes are the file after it closes. The baseline is today's event log alone (floor's third stage without decode and map).")
	fmt.Fprintf(out, "read: wall time to read one event's body by its id, %d events spread over the run, the file reopened (page cache warm).\n", len(sample))
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layout\tCPU µs/span\tbytes/span\tspans/s\tread µs/body\tCPU ×\tbytes ×\tspans/s ×\tread ×\t")
	type medians struct{ cpu, bytes, rate, read float64 }
	med := make([]medians, len(layouts))
	for i, fs := range figures {
		var cpu, bytes, rate, read []float64
		for _, f := range fs {
			cpu = append(cpu, float64(f.cpu)/float64(time.Microsecond)/float64(spans))
			bytes = append(bytes, float64(f.bytes)/float64(spans))
			rate = append(rate, float64(spans)/f.wall.Seconds())
			read = append(read, float64(f.read)/float64(time.Microsecond))
		}
		med[i] = medians{median(cpu), median(bytes), median(rate), median(read)}
	}
	for i, l := range layouts {
		m, b := med[i], med[0]
		fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t%.0f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", l.name, m.cpu, m.bytes, m.rate, m.read,
			m.cpu/b.cpu, m.bytes/b.bytes, m.rate/b.rate, m.read/b.read)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printWriterObjects(ctx, c, dir, bodies[0], spans, out)
}

// printWriterObjects weighs what the writer stores of the same requests,
// table by table, and what the spans only the log's reader needs (HTTP
// and context spans: no page draws them) take of it.
func printWriterObjects(ctx context.Context, c leversConfig, dir string, bodies [][]byte, spans int, out io.Writer) error {
	objects, roles, err := writerObjects(ctx, c, filepath.Join(dir, "levers-writer.db"), bodies)
	if err != nil {
		return fmt.Errorf("the writer: %w", err)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "The same requests through the writer (everything serve stores), each table and index of the file it leaves (dbstat):")
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table or index\tof table\tbytes/span\trows/span\t")
	var total, spansBytes, derivedRows, smallBytes int64
	small := 0
	for _, o := range objects {
		if o.table == "spans" {
			spansBytes += o.bytes
		}
		if o.rows > 0 && o.table != "events" {
			derivedRows += o.rows
		}
		total += o.bytes
		// The tables a span never writes weigh a page or two each.
		if o.bytes < int64(spans) {
			small++
			smallBytes += o.bytes
			continue
		}
		rows := "–"
		if o.rows >= 0 {
			rows = fmt.Sprintf("%.2f", float64(o.rows)/float64(spans))
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t\n", o.name, o.table, float64(o.bytes)/float64(spans), rows)
	}
	fmt.Fprintf(tw, "%d others under 1 B a span\t\t%.1f\t\t\n", small, float64(smallBytes)/float64(spans))
	fmt.Fprintf(tw, "all\t\t%.0f\t%.2f derived\t\n", float64(total)/float64(spans), float64(derivedRows)/float64(spans))
	if err := tw.Flush(); err != nil {
		return err
	}
	var spanRows int64
	for _, n := range roles {
		spanRows += n
	}
	logOnly := roles["http"] + roles["context"]
	fmt.Fprintf(out, "\nspans rows by role: model %d, http %d, context %d (of %d spans sent).\n", roles["model"], roles["http"], roles["context"], spans)
	if spanRows > 0 {
		saved := float64(spansBytes) * float64(logOnly) / float64(spanRows) / float64(spans)
		fmt.Fprintf(out, "HTTP and context spans, read from the log on demand instead of kept as rows: %d of %d spans rows, about %.0f B a span of the spans table and its index (%.0f%% of the writer's %.0f B).\n",
			logOnly, spanRows, saved, 100*saved*float64(spans)/float64(total), float64(total)/float64(spans))
	}
	return nil
}

// insertRequests stores each request as one row of deflated bodies, its
// events' ids and entities as entries of the two fixed-width indexes: the
// ids first, so that a request's duplicates (a retry) leave neither body
// nor entity entry.
func (s *leverStore) insertRequests(sh logShape, requests [][]logEvent, at int64) error {
	if s.deflate == nil {
		w, err := flate.NewWriter(&s.packed, sh.level)
		if err != nil {
			return err
		}
		s.deflate = w
	}
	for _, evs := range requests {
		request := s.nextBlock + 1
		fresh := map[int64]bool{}
		err := chunks(evs, func(chunk []logEvent) error {
			args := make([]any, 0, 2*len(chunk))
			for _, ev := range chunk {
				args = append(args, idHash(ev.id), request)
			}
			rows, err := s.tx.Query(rowsQuery(`INSERT INTO event_ids (id_hash, request) VALUES `, `(?, ?)`, len(chunk),
				` ON CONFLICT (id_hash) DO NOTHING RETURNING id_hash`), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var h int64
				if err := rows.Scan(&h); err != nil {
					return err
				}
				fresh[h] = true
			}
			return rows.Err()
		})
		if err != nil {
			return err
		}
		if len(fresh) == 0 {
			continue
		}
		s.raw.Reset()
		var stored []logEvent
		for _, ev := range evs {
			if h := idHash(ev.id); fresh[h] {
				delete(fresh, h) // the first of an id repeated in the request
				s.raw.Write(binary.AppendUvarint(nil, uint64(len(ev.body))))
				s.raw.Write(ev.body)
				stored = append(stored, ev)
			}
		}
		s.packed.Reset()
		s.deflate.Reset(&s.packed)
		if _, err := s.deflate.Write(s.raw.Bytes()); err != nil {
			return err
		}
		if err := s.deflate.Close(); err != nil {
			return err
		}
		if _, err := s.tx.Exec(`INSERT INTO requests (seq, events, bodies, received_at) VALUES (?, ?, ?, ?)`, request, len(stored), s.packed.Bytes(), at); err != nil {
			return err
		}
		err = chunks(stored, func(chunk []logEvent) error {
			args := make([]any, 0, 2*len(chunk))
			for _, ev := range chunk {
				args = append(args, idHash(ev.entity), request)
			}
			_, err := s.tx.Exec(rowsQuery(`INSERT INTO event_entities (entity_hash, request) VALUES `, `(?, ?)`, len(chunk),
				` ON CONFLICT DO NOTHING`), args...)
			return err
		})
		if err != nil {
			return err
		}
		s.inserted += len(stored)
		s.nextBlock++
	}
	return nil
}

// requestBody is how a reader of the per-request layout finds one event's
// body by its id: the dedupe index names the request, whose bodies are
// inflated and walked to the one holding the id.
func requestBody(ctx context.Context, db *sql.DB, id string) ([]byte, error) {
	var bodies []byte
	err := db.QueryRowContext(ctx, `SELECT r.bodies FROM event_ids e JOIN requests r ON r.seq = e.request WHERE e.id_hash = ?`, idHash(id)).Scan(&bodies)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", id, err)
	}
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(bodies)))
	if err != nil {
		return nil, fmt.Errorf("event %s: inflate: %w", id, err)
	}
	want := []byte(`"id":"` + id + `"`)
	for len(raw) > 0 {
		n, k := binary.Uvarint(raw)
		if k <= 0 || uint64(len(raw)-k) < n {
			return nil, fmt.Errorf("event %s: a request's bodies end short", id)
		}
		body := raw[k : k+int(n)]
		if bytes.Contains(body, want) {
			return body, nil
		}
		raw = raw[k+int(n):]
	}
	return nil, fmt.Errorf("event %s: not in its request", id)
}

// leverReads is how many events' bodies each layout is timed reading.
const leverReads = 1000

// timeReads opens the layout's file at path and reads each sampled event's
// body by its id, checking it, and returns the wall time a read.
func timeReads(ctx context.Context, c leversConfig, sh logShape, path string, sample []logEvent) (time.Duration, error) {
	db, err := sql.Open("sqlite", rawDSN(path, c.sync)+"&_pragma=query_only(1)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	begin := time.Now()
	for _, ev := range sample {
		body, err := bodyByID(ctx, db, sh, ev.id)
		if err != nil {
			return 0, err
		}
		if !bytes.Equal(body, ev.body) {
			return 0, fmt.Errorf("event %s: read back %d bytes unlike the %d stored", ev.id, len(body), len(ev.body))
		}
	}
	return time.Since(begin) / time.Duration(len(sample)), nil
}

// bodyByID reads one event's body by its id from a layout of the log: what
// a reader of spans kept only in the log (HTTP and context spans, read on
// demand) would do.
func bodyByID(ctx context.Context, db *sql.DB, sh logShape, id string) ([]byte, error) {
	var body []byte
	var err error
	switch {
	case sh.perRequest:
		return requestBody(ctx, db, id)
	case sh.blocks:
		var seq int64
		if err := db.QueryRowContext(ctx, `SELECT seq FROM events WHERE id_hash = ?`, idHash(id)).Scan(&seq); err != nil {
			return nil, fmt.Errorf("event %s: %w", id, err)
		}
		return blockBody(ctx, db, seq)
	case sh.hashID:
		err = db.QueryRowContext(ctx, `SELECT body FROM events WHERE id_hash = ?`, idHash(id)).Scan(&body)
	default:
		err = db.QueryRowContext(ctx, `SELECT body FROM events WHERE id = ?`, id).Scan(&body)
	}
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", id, err)
	}
	return body, nil
}

// blockBody is how a reader of the block layout finds one event's body:
// its block inflated, size bytes from at.
func blockBody(ctx context.Context, db *sql.DB, seq int64) ([]byte, error) {
	var at, size int
	var block []byte
	err := db.QueryRowContext(ctx, `SELECT e.at, e.size, b.bodies FROM events e JOIN blocks b ON b.block = e.block WHERE e.seq = ?`, seq).
		Scan(&at, &size, &block)
	if err != nil {
		return nil, fmt.Errorf("event %d: %w", seq, err)
	}
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(block)))
	if err != nil {
		return nil, fmt.Errorf("event %d: inflate: %w", seq, err)
	}
	if at+size > len(raw) {
		return nil, fmt.Errorf("event %d: body at %d+%d past the block's %d bytes", seq, at, size, len(raw))
	}
	return raw[at : at+size], nil
}

// derivedObject is one table or index of the writer's database: its pages'
// bytes and, for a table, its rows.
type derivedObject struct {
	name, table string
	bytes       int64
	rows        int64 // -1 for an index
}

// writerObjects runs the writer (everything serve stores) over bodies into
// a fresh store at path and weighs each table and index of the file it
// leaves (SQLite's dbstat), with the spans table's rows by role.
func writerObjects(ctx context.Context, c leversConfig, path string, bodies [][]byte) ([]derivedObject, map[string]int64, error) {
	if err := runWriter(ctx, c.sync, path, bodies); err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("sqlite", rawDSN(path, c.sync))
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT d.name, m.tbl_name, m.type, sum(d.pgsize) FROM dbstat d JOIN sqlite_master m ON m.name = d.name
		GROUP BY d.name ORDER BY sum(d.pgsize) DESC`)
	if err != nil {
		return nil, nil, fmt.Errorf("dbstat: %w", err)
	}
	var objects []derivedObject
	for rows.Next() {
		var o derivedObject
		var kind string
		if err := rows.Scan(&o.name, &o.table, &kind, &o.bytes); err != nil {
			rows.Close()
			return nil, nil, err
		}
		o.rows = -1
		if kind == "table" {
			o.rows = 0
		}
		objects = append(objects, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	for i, o := range objects {
		if o.rows < 0 {
			continue
		}
		// Names come from sqlite_master, not from input.
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM "`+o.name+`"`).Scan(&objects[i].rows); err != nil {
			return nil, nil, fmt.Errorf("count %s: %w", o.name, err)
		}
	}
	roles := map[string]int64{}
	rows, err = db.QueryContext(ctx, `SELECT role, count(*) FROM spans GROUP BY role`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var role string
		var n int64
		if err := rows.Scan(&role, &n); err != nil {
			return nil, nil, err
		}
		roles[role] = n
	}
	return objects, roles, rows.Err()
}
