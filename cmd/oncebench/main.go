// Command oncebench measures oncetrace under load. Each suite starts a real
// server on 127.0.0.1 (web.New over a fresh SQLite file in a temporary
// directory, the writer publishing to the live hub as serve wires it) and
// prints a table:
//
//	oncebench ingest [flags]  native ingest over HTTP against the raw SQLite ceiling, group commit on against off
//	oncebench otlp [flags]    OTLP/HTTP ingest of protobuf span batches
//	oncebench live [flags]    ingest with and without 1,000 live WebSocket readers, and their delivery latency
//	oncebench engines [flags] SQLite against PostgreSQL (a throwaway cluster, or -postgres URL): ingest and page times, and what a second instance on the same database adds
//	oncebench all [-quick]    the four in order
//	oncebench search [flags]  search time at 10,000 and 1,000,000 events (minutes; not part of all)
//	oncebench reads [flags]   every read at 10k, 100k (and -million: 1M) executions, and the ratio (minutes; not part of all)
//	oncebench floor [flags]   compare's requests through serve's stages one by one, CPU and bytes a span each
//	oncebench levers [flags]  the event log laid out each way the floor points at, against today's layout
//	oncebench compare [flags] OTLP ingest against Jaeger with Badger, interleaved (minutes; not part of all)
//
// `make bench` runs `oncebench all`; -quick is a CI-sized run of each.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

var suites = []struct {
	name, about string
	run         func(args []string, out io.Writer) error
}{
	{"ingest", "native ingest over HTTP against the raw SQLite ceiling, group commit on against off",
		suite("ingest", "ingest", ingestFlags, runIngest)},
	{"otlp", "OTLP/HTTP ingest of protobuf span batches", suite("otlp", "OTLP ingest", otlpFlags, runOTLP)},
	{"live", "ingest with and without 1,000 live WebSocket readers, and their delivery latency", suite("live", "live delivery", liveFlags, runLive)},
	{"engines", "SQLite against PostgreSQL, and two instances on one PostgreSQL database: ingest and page times, the same load on each", suite("engines", "SQLite against PostgreSQL", enginesFlags, runEngines)},
}

// standalone suites run only when named: building their database takes
// minutes, too long for `all`.
var standalone = []struct {
	name, about string
	run         func(args []string, out io.Writer) error
}{
	{"search", "search time at 10,000 and 1,000,000 events, and their ratio", suite("search", "search", searchFlags, runSearch)},
	{"reads", "every read at 10k and 100k executions (-million: and 1M), and the ratio of the largest to the smallest",
		suite("reads", "read scaling", readsFlags, runReads)},
	{"floor", "compare's requests through serve's stages one by one (decode, map, event log, writer), CPU and bytes a span each, random and sequential ids",
		suite("floor", "what each stage of OTLP ingest costs", floorFlags, runFloor)},
	{"levers", "compare's requests into the event log laid out each way the floor points at (hashed ids, compressed blocks, fewer indexes, checkpoints), against today's",
		suite("levers", "event log storage levers", leversFlags, runLevers)},
	{"compare", "OTLP ingest against Jaeger with Badger, the same requests to each, interleaved (builds Jaeger once, ~5 min)",
		suite("compare", "OTLP ingest against Jaeger", compareFlags, runCompare)},
}

// suiteConfig is a suite's parsed flags, runFlags among them.
type suiteConfig interface {
	setUp(suite string) (dir string, cleanUp func(), err error)
}

// suite joins a suite's flags to its measurement: parse the flags, set up
// the directory and CPU profile they ask for, print the header, measure.
func suite[C suiteConfig](name, title string, parse func([]string) (C, error), measure func(C, string, io.Writer) error) func([]string, io.Writer) error {
	return func(args []string, out io.Writer) error {
		c, err := parse(args)
		if err != nil {
			return err
		}
		dir, cleanUp, err := c.setUp(name)
		if err != nil {
			return err
		}
		defer cleanUp()
		printHeader(out, title)
		return measure(c, dir, out)
	}
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "oncebench:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		usage(os.Stderr)
		return errors.New("name a suite")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "all":
		return runAll(rest, out)
	case "help", "-h", "-help", "--help":
		usage(out)
		return nil
	}
	for _, s := range suites {
		if s.name == name {
			return runSuite(s.name, s.run, rest, out)
		}
	}
	for _, s := range standalone {
		if s.name == name {
			return runSuite(s.name, s.run, rest, out)
		}
	}
	usage(os.Stderr)
	return fmt.Errorf("unknown suite %q", name)
}

// runSuite runs one suite; -h prints its flags and is no failure.
func runSuite(name string, runFn func([]string, io.Writer) error, args []string, out io.Writer) error {
	err := runFn(args, out)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// runAll runs every suite in order, with its default sizes or -quick, and
// stops at the first that fails.
func runAll(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("oncebench all", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "a CI-sized run of each suite")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("all: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("all: unexpected arguments %q; run a suite alone to set its flags", fs.Args())
	}
	var suiteArgs []string
	if *quick {
		suiteArgs = []string{"-quick"}
	}
	for i, s := range suites {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := runSuite(s.name, s.run, suiteArgs, out); err != nil {
			return err
		}
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: oncebench SUITE [flags]   (oncebench SUITE -h lists a suite's flags)")
	for _, s := range suites {
		fmt.Fprintf(w, "  %-7s %s\n", s.name, s.about)
	}
	fmt.Fprintf(w, "  %-7s %s\n", "all", "the suites above in order; -quick for a CI-sized run of each")
	for _, s := range standalone {
		fmt.Fprintf(w, "  %-7s %s (not part of all)\n", s.name, s.about)
	}
}
