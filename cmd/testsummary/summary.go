package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail name the package here
	Test       string
	Output     string
	Elapsed    float64
}

// report is what the go test step leaves for the final line.
type report struct {
	Packages       int // packages with tests that ran
	FailedPackages []string
	Passed, Failed int // tests and subtests
	FailedTests    []string
	Skipped        []skip
	NoJSON         bool // the stream held no test result at all: go test did not run
}

// OK says whether the step passed: something ran and nothing failed.
func (r report) OK() bool {
	return !r.NoJSON && len(r.FailedPackages) == 0 && r.Failed == 0
}

// skip is the skipped tests of one package that give one reason.
type skip struct {
	Package  string
	Reason   string
	Tests    []string
	TopLevel bool // one of them is a whole test, not a subtest: a suite skipped
}

// packageState buffers a package's output until its result, as plain go
// test does: a passing package prints one line, a failing one its failures.
type packageState struct {
	output   []string            // the package's own lines (TestMain, panics, the FAIL line)
	tests    map[string][]string // each test's lines
	order    []string            // tests in the order they started
	failed   []string
	notEnded map[string]bool // started and not ended: a timeout's or a panic's victims
}

// logLine is a t.Log, t.Error or t.Skip line: "    file_test.go:12: text".
var logLine = regexp.MustCompile(`^\s+[^\s:]+\.go:\d+: (.*)$`)

// summarize prints plain go test's output for the -json stream in to out
// and counts what ran.
func summarize(in io.Reader, out io.Writer) (report, error) {
	var r report
	r.NoJSON = true
	packages := map[string]*packageState{}
	skips := map[[2]string]*skip{}
	state := func(pkg string) *packageState {
		p := packages[pkg]
		if p == nil {
			p = &packageState{tests: map[string][]string{}, notEnded: map[string]bool{}}
			packages[pkg] = p
		}
		return p
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if !strings.HasPrefix(sc.Text(), "{") || json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(out, sc.Text()) // go's own messages pass through
			continue
		}
		switch {
		case e.Action == "build-output":
			io.WriteString(out, e.Output) // compile errors, at once
			continue
		case e.Action == "build-fail" || e.Action == "start":
			continue
		}
		p := state(e.Package)
		if e.Test == "" {
			switch e.Action {
			case "output":
				p.output = append(p.output, e.Output)
			case "pass", "fail", "skip":
				r.NoJSON = false
				endPackage(&r, e, p, out)
				delete(packages, e.Package)
			}
			continue
		}
		switch e.Action {
		case "run":
			p.order = append(p.order, e.Test)
			p.notEnded[e.Test] = true
		case "output":
			p.tests[e.Test] = append(p.tests[e.Test], e.Output)
		case "pass":
			r.Passed++
			delete(p.notEnded, e.Test)
		case "fail":
			r.Failed++
			r.FailedTests = append(r.FailedTests, shortPackage(e.Package)+" "+e.Test)
			p.failed = append(p.failed, e.Test)
			delete(p.notEnded, e.Test)
		case "skip":
			delete(p.notEnded, e.Test)
			reason := skipReason(p.tests[e.Test])
			k := [2]string{e.Package, reason}
			s := skips[k]
			if s == nil {
				s = &skip{Package: shortPackage(e.Package), Reason: reason}
				skips[k] = s
			}
			s.Tests = append(s.Tests, e.Test)
			s.TopLevel = s.TopLevel || !strings.Contains(e.Test, "/")
		}
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("reading go test -json: %w", err)
	}
	for _, s := range skips {
		r.Skipped = append(r.Skipped, *s)
	}
	// Whole tests skipped first (a suite missing what it needs), then the
	// biggest groups.
	slices.SortFunc(r.Skipped, func(a, b skip) int {
		if a.TopLevel != b.TopLevel {
			if a.TopLevel {
				return -1
			}
			return 1
		}
		return cmp.Or(len(b.Tests)-len(a.Tests), strings.Compare(a.Package, b.Package), strings.Compare(a.Reason, b.Reason))
	})
	return r, nil
}

// endPackage prints a package's result as plain go test would.
func endPackage(r *report, e event, p *packageState, out io.Writer) {
	if e.Action == "skip" { // no test files
		fmt.Fprintf(out, "?   \t%s\t[no test files]\n", e.Package)
		return
	}
	r.Packages++
	if e.Action == "pass" {
		fmt.Fprintf(out, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
		return
	}
	r.FailedPackages = append(r.FailedPackages, e.Package)
	// A failing package: every failed test's output (a parent's and its
	// subtests' in the order they ran), then what was still running when
	// the package ended (a panic or a timeout), then the package's own.
	var shown []string
	for _, t := range p.order {
		if slices.Contains(p.failed, t) || p.notEnded[t] {
			shown = append(shown, t)
		}
	}
	for _, t := range shown {
		for _, line := range p.tests[t] {
			if !strings.HasPrefix(line, "=== ") {
				io.WriteString(out, line)
			}
		}
	}
	for _, line := range p.output {
		io.WriteString(out, line)
	}
	if n := len(p.output); n == 0 || !strings.HasPrefix(p.output[n-1], "FAIL\t") {
		fmt.Fprintf(out, "FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
	}
}

// skipReason is the last thing a skipped test logged, the t.Skip message,
// with the lines a message of several lines continues on.
func skipReason(lines []string) string {
	reason := ""
	for _, line := range lines {
		line = strings.TrimRight(line, "\n")
		switch m := logLine.FindStringSubmatch(line); {
		case m != nil:
			reason = strings.TrimSpace(m[1])
		case reason != "" && strings.HasPrefix(line, " ") && strings.TrimSpace(line) != "":
			reason += " " + strings.TrimSpace(line)
		}
	}
	return cmp.Or(reason, "no reason given")
}

// shortPackage drops the module path: web, store/postgres.
func shortPackage(pkg string) string {
	const module = "github.com/oncetrace/oncetrace/"
	if rest, ok := strings.CutPrefix(pkg, module); ok {
		return rest
	}
	return pkg
}

func writeReport(path string, r report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func readReport(path string) (report, error) {
	var r report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("report %s: %w", path, err)
	}
	return r, nil
}

// finalLine is make test's last line, e.g.
//
//	make test: ok — 31 packages, 2,140 tests (12 skipped: web: chromium not found (3)), 13.2 min
func finalLine(r report, haveReport bool, status int, took time.Duration) string {
	verdict := "ok"
	if status != 0 || haveReport && !r.OK() {
		verdict = "FAILED"
	}
	minutes := fmt.Sprintf("%.1f min", took.Minutes())
	if !haveReport {
		return fmt.Sprintf("make test: %s — the go test step did not finish (see the first error above), %s", verdict, minutes)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "make test: %s — %s, %s", verdict, count(r.Packages, "package"), count(r.Passed+r.Failed+skippedCount(r), "test"))
	var notes []string
	if r.Failed > 0 {
		notes = append(notes, fmt.Sprintf("%s failed: %s", thousands(r.Failed), listSome(r.FailedTests, 3)))
	}
	var brokenPackages []string // failed with no test failing: a build error, a panic in TestMain
	for _, pkg := range r.FailedPackages {
		short := shortPackage(pkg)
		if !slices.ContainsFunc(r.FailedTests, func(t string) bool { return strings.HasPrefix(t, short+" ") }) {
			brokenPackages = append(brokenPackages, short)
		}
	}
	if len(brokenPackages) > 0 {
		notes = append(notes, fmt.Sprintf("packages failed: %s", listSome(brokenPackages, 3)))
	}
	if n := skippedCount(r); n > 0 {
		var why []string
		for _, s := range r.Skipped {
			why = append(why, s.String(70))
		}
		notes = append(notes, fmt.Sprintf("%s skipped: %s", thousands(n), listSome(why, shownSkips)))
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(notes, "; "))
	}
	fmt.Fprintf(&b, ", %s", minutes)
	if status != 0 && r.OK() {
		b.WriteString("; a step after go test failed: see above")
	}
	return b.String()
}

// String is "package: reason (tests)", the reason cut to width runes.
func (s skip) String(width int) string {
	return fmt.Sprintf("%s: %s (%d)", s.Package, clip(s.Reason, width), len(s.Tests))
}

// skippedList lists every group of skipped tests with its tests, for when
// the final line has no room for them all.
func skippedList(r report) string {
	var b strings.Builder
	b.WriteString("skipped, by package and reason:\n")
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "  %s: %s\n", s.String(200), listSome(s.Tests, 5))
	}
	return b.String()
}

func skippedCount(r report) int {
	n := 0
	for _, s := range r.Skipped {
		n += len(s.Tests)
	}
	return n
}

// listSome joins the first n items, and says how many more there are.
func listSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:n], "; "), len(items)-n)
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// count is "1 package" or "2,140 tests".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return thousands(n) + " " + noun + "s"
}

// thousands writes 2140 as 2,140.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// shownSkips is how many groups of skipped tests the final line names;
// with more, they are all listed on the lines above it.
const shownSkips = 3
