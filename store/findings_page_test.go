package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// TestFindingsPagesCoverEveryFindingOnce: paging the findings list by its
// cursor, at sizes that cut between equal sort keys too, gives every
// stored finding once, in the order of the unpaged list, critical first;
// a cursor not issued by the store is refused.
func TestFindingsPagesCoverEveryFindingOnce(t *testing.T) {
	ctx := context.Background()
	db, w := openDB(t)
	var events []map[string]any
	for i := range 12 {
		id := fmt.Sprintf("exec_%02d", i)
		events = append(events, executionEvents(id, base.Add(time.Duration(i)*time.Hour), 3, 2, 2)...)
		events = append(events, retriedUnsafe(id, base.Add(time.Duration(i)*time.Hour))...)
	}
	write(t, w, events...)
	all, err := db.Findings(ctx, store.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 24 || all[0].Severity != trace.SeverityCritical {
		t.Fatalf("unpaged: got %d findings, first %v; want at least 24, critical first", len(all), all[0].Severity)
	}
	for _, size := range []int{1, 5, 7, 1000} {
		var got []trace.Finding
		pages := 0
		for cursor := ""; ; {
			page, next, err := db.FindingsPage(ctx, store.FindingFilter{Cursor: cursor, Limit: size})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > size {
				t.Fatalf("page of %d: got %d findings", size, len(page))
			}
			got, pages = append(got, page...), pages+1
			if cursor = next; cursor == "" {
				break
			}
		}
		if !slices.EqualFunc(got, all, func(a, b trace.Finding) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
			t.Errorf("pages of %d: got %d findings in %d pages, want the %d of the unpaged list in its order", size, len(got), pages, len(all))
		}
	}
	critical, _, err := db.FindingsPage(ctx, store.FindingFilter{Severity: trace.SeverityCritical, Limit: 1000})
	if err != nil || len(critical) == 0 || len(critical) != trace.CriticalCount(all) {
		t.Errorf("critical only: got %d, %v; want %d", len(critical), err, trace.CriticalCount(all))
	}
	if _, _, err := db.FindingsPage(ctx, store.FindingFilter{Cursor: "bm90IGEgY3Vyc29y"}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("a made-up cursor: got %v, want ErrBadCursor", err)
	}
}

// TestFindingsListInNaturalOrder: the findings list, whole and paged,
// gives step-2 before step-14 before step-123 and exec-9 before exec-10,
// as trace.CompareFindingPlaces orders them, ties such as step-7 and
// step-007 by the id itself.
func TestFindingsListInNaturalOrder(t *testing.T) {
	ctx := context.Background()
	db, w := openDB(t)
	var events []map[string]any
	for i, exec := range []string{"exec-10", "exec-9"} {
		for j, step := range []string{"step-123", "step-14", "step-2", "step-7", "step-007"} {
			at := base.Add(time.Duration(i)*time.Hour + time.Duration(j)*time.Minute)
			for n := 1; n <= 2; n++ {
				events = append(events, map[string]any{"type": "attempt", "execution_id": exec, "step_id": step, "attempt": n, "effect": "unsafe",
					"started_at": stamp(at.Add(time.Duration(n) * time.Second)), "ended_at": stamp(at.Add(time.Duration(n)*time.Second + 500*time.Millisecond)),
					"outcome": []string{"timeout", "ok"}[n-1]})
			}
		}
	}
	write(t, w, events...)
	want := []string{}
	for _, exec := range []string{"exec-9", "exec-10"} {
		for _, step := range []string{"step-2", "step-007", "step-7", "step-14", "step-123"} {
			want = append(want, exec+"/"+step)
		}
	}
	places := func(fs []trace.Finding) []string {
		var out []string
		for _, f := range fs {
			if f.Rule == trace.RuleUnsafeRetried {
				out = append(out, f.ExecutionID+"/"+f.StepID)
			}
		}
		return out
	}
	all, err := db.Findings(ctx, store.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := places(all); !slices.Equal(got, want) {
		t.Errorf("findings list: got %q, want %q", got, want)
	}
	var paged []trace.Finding
	for cursor := ""; ; {
		page, next, err := db.FindingsPage(ctx, store.FindingFilter{Cursor: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if got := places(paged); !slices.Equal(got, want) {
		t.Errorf("findings list by pages of 3: got %q, want %q", got, want)
	}
}
