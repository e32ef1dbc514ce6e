// Command testsummary is make test's reporter. Behind `go test -json` it
// prints what plain `go test` would (an ok line a package; a failing
// test's whole output; build errors) and counts packages, tests and skips,
// with each skip's reason, into a report file; at the end of make test it
// turns that report into the one line that says how the run went.
//
//	go test -json ./... | testsummary -report FILE   # exit 1 when a test failed
//	testsummary -line -report FILE -started UNIX -status N
//
// It is a development tool: nothing of oncetrace imports it.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	report := flag.String("report", "", "the report file: written while reading go test -json, read with -line")
	line := flag.Bool("line", false, "print the final line from -report instead of reading go test -json")
	started := flag.Int64("started", 0, "with -line: when make test started, in Unix seconds")
	status := flag.Int("status", 0, "with -line: make test's exit status so far")
	flag.Parse()
	if *report == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "testsummary: usage: go test -json ./... | testsummary -report FILE, or testsummary -line -report FILE -started UNIX -status N")
		os.Exit(2)
	}
	if *line {
		r, err := readReport(*report)
		if err != nil && !os.IsNotExist(err) {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
		}
		if len(r.Skipped) > shownSkips {
			fmt.Print(skippedList(r))
		}
		// No report: make test failed before the go test step finished.
		fmt.Println(finalLine(r, err == nil, *status, time.Since(time.Unix(*started, 0))))
		return
	}
	os.Exit(filter(os.Stdin, os.Stdout, *report))
}

// filter reads go test -json from in, prints plain go test's output to out
// and writes the report; it returns the exit status.
func filter(in io.Reader, out io.Writer, reportPath string) int {
	r, err := summarize(in, out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 1
	}
	if err := writeReport(reportPath, r); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 1
	}
	if !r.OK() {
		return 1
	}
	return 0
}
