package store

import (
	"database/sql"
	"encoding/json"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// Times are stored as Unix nanoseconds, NULL when unknown.

func nanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// JSON columns hold '' when empty.

func jsonText(v any) string {
	switch v := v.(type) {
	case json.RawMessage:
		return string(v)
	case []trace.Conflict:
		if len(v) == 0 {
			return ""
		}
	case map[string]string:
		if len(v) == 0 {
			return ""
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func conflicts(s string) []trace.Conflict {
	if s == "" {
		return nil
	}
	var cs []trace.Conflict
	_ = json.Unmarshal([]byte(s), &cs)
	return cs
}

func labels(s string) map[string]string {
	if s == "" {
		return nil
	}
	var m map[string]string
	_ = json.Unmarshal([]byte(s), &m)
	return m
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
