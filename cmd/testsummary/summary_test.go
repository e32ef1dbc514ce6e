package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testdata/failing.json is go test -json of three packages: one with a
// passing test, a failing one, a skipped test and a skipped subtest (a
// reason on two lines); one without tests; one that does not compile.

func TestSummarizePrintsWhatPlainGoTestWould(t *testing.T) {
	in, err := os.Open("testdata/failing.json")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out strings.Builder
	r, err := summarize(in, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"c/c_test.go:3:33: undefined: undefined",                  // the compile error
		"?   \tgithub.com/oncetrace/oncetrace/b\t[no test files]", // as go test says it
		"    a_test.go:9: before\n    a_test.go:9: got 1, want 2\n--- FAIL: TestFail",
		"FAIL\tgithub.com/oncetrace/oncetrace/a\t0.005s",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output: got\n%s\nwant it to contain %q", out.String(), want)
		}
	}
	for _, noise := range []string{"hello", "=== RUN", "--- PASS"} {
		if strings.Contains(out.String(), noise) {
			t.Errorf("output: got\n%s\nwant no %q: a passing test's output is not shown", out.String(), noise)
		}
	}
	if r.Packages != 2 || r.Passed != 3 || r.Failed != 1 || len(r.FailedPackages) != 2 || r.OK() {
		t.Errorf("report: got %+v, want 2 packages run, 3 passed, 1 failed, 2 packages failed, not OK", r)
	}
	want := []skip{
		{Package: "a", Reason: "chromium not found: install it", Tests: []string{"TestSkipTop"}, TopLevel: true},
		{Package: "a", Reason: "PostgreSQL not found; set X", Tests: []string{"TestSub/postgres"}},
	}
	if len(r.Skipped) != len(want) {
		t.Fatalf("skipped: got %+v, want %+v", r.Skipped, want)
	}
	for i := range want {
		if got := r.Skipped[i]; got.String(200) != want[i].String(200) || got.TopLevel != want[i].TopLevel {
			t.Errorf("skipped[%d]: got %+v, want %+v", i, got, want[i])
		}
	}
	line := finalLine(r, true, 2, 90*time.Second)
	wantLine := "make test: FAILED — 2 packages, 6 tests (1 failed: a TestFail; packages failed: c; " +
		"2 skipped: a: chromium not found: install it (1); a: PostgreSQL not found; set X (1)), 1.5 min"
	if line != wantLine {
		t.Errorf("final line:\n got %s\nwant %s", line, wantLine)
	}
}

func TestFilterExitStatus(t *testing.T) {
	passing := `{"Action":"start","Package":"example.com/p"}
{"Action":"run","Package":"example.com/p","Test":"TestOK"}
{"Action":"output","Package":"example.com/p","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"example.com/p","Test":"TestOK","Elapsed":0}
{"Action":"output","Package":"example.com/p","Output":"ok  \texample.com/p\t0.010s\n"}
{"Action":"pass","Package":"example.com/p","Elapsed":0.01}
`
	failing, err := os.ReadFile("testdata/failing.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, in string
		want     int
	}{
		{"passing", passing, 0},
		{"failing", string(failing), 1},
		// go test that ran nothing (a bad flag, a pattern matching
		// nothing) must not pass as a clean run.
		{"no results", "go: unknown flag -rcae\n", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "report.json")
			var out strings.Builder
			if got := filter(strings.NewReader(tt.in), &out, report); got != tt.want {
				t.Errorf("exit status: got %d, want %d; output:\n%s", got, tt.want, out.String())
			}
			if _, err := readReport(report); err != nil {
				t.Errorf("report: %v", err)
			}
		})
	}
}

func TestFinalLineOfAPassingRun(t *testing.T) {
	r := report{Packages: 31, Passed: 2128, Skipped: []skip{
		{Package: "web", Reason: "chromium not found", Tests: make([]string, 3), TopLevel: true},
		{Package: "store", Reason: "SQLite only", Tests: make([]string, 9)},
	}}
	got := finalLine(r, true, 0, 13*time.Minute+12*time.Second)
	want := "make test: ok — 31 packages, 2,140 tests (12 skipped: web: chromium not found (3); store: SQLite only (9)), 13.2 min"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := finalLine(report{Packages: 1, Passed: 1}, true, 0, time.Minute); got != "make test: ok — 1 package, 1 test, 1.0 min" {
		t.Errorf("one of each: got %q", got)
	}
	// A step after go test failed (the fuzzing, say): not ok, and said why.
	if got := finalLine(r, true, 2, time.Minute); !strings.HasPrefix(got, "make test: FAILED") || !strings.HasSuffix(got, "a step after go test failed: see above") {
		t.Errorf("with make's status 2: got %q, want FAILED and the step after go test blamed", got)
	}
}
