package store_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store/sqlite"
)

func TestZZReadHuge(t *testing.T) {
	if os.Getenv("ZZPROF") == "" {
		t.Skip()
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, "/tmp/huge.db", sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 3 {
		db.ReadExecution(ctx, "huge", nil)
	}
	var times []time.Duration
	for range 15 {
		s := time.Now()
		if _, err := db.ReadExecution(ctx, "huge", nil); err != nil {
			t.Fatal(err)
		}
		times = append(times, time.Since(s))
	}
	t.Logf("%v", times)
}
