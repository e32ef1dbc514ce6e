package views

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Duration reads like a person would say it: 110 ms, 10.1 s, 53 s, 4 min 2 s.
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + Duration(-d)
	case d == 0:
		return "0 s"
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < 10*time.Second:
		return trimZero(fmt.Sprintf("%.2f", d.Seconds())) + " s"
	case d < time.Minute:
		return trimZero(fmt.Sprintf("%.1f", d.Seconds())) + " s"
	case d < time.Hour:
		// Round once, so 4 min 59.6 s reads 5 min 0 s, not 4 min 60 s.
		r := d.Round(time.Second)
		return fmt.Sprintf("%d min %d s", int(r/time.Minute), int(r%time.Minute/time.Second))
	case d < 48*time.Hour:
		h := int(d.Hours())
		return fmt.Sprintf("%d h %d min", h, int(d.Minutes())-60*h)
	}
	return fmt.Sprintf("%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
}

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// UTC is the hover form of a time, and its text where no zone was chosen.
func UTC(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// ISO is the datetime attribute of a <time>, always in UTC.
func ISO(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

type zoneKey struct{}

// WithZone returns a context in which pages show times in loc. The web
// package sets it from the reader's cookie; views never sees the request.
func WithZone(ctx context.Context, loc *time.Location) context.Context {
	return context.WithValue(ctx, zoneKey{}, loc)
}

// Zone is the time zone pages rendered with ctx show times in: the one set
// by WithZone, else UTC.
func Zone(ctx context.Context) *time.Location {
	if loc, ok := ctx.Value(zoneKey{}).(*time.Location); ok && loc != nil {
		return loc
	}
	return time.UTC
}

// ZoneName is how a page names its zone: "UTC" or an IANA name.
func ZoneName(loc *time.Location) string {
	if loc == nil || loc == time.UTC || loc.String() == "UTC" {
		return "UTC"
	}
	return loc.String()
}

// InZone is a time's text in loc, always followed by the zone's name, so
// that a reader never has to guess which zone a time is in:
// "2026-12-01 03:03:04.123 Europe/Berlin". An abbreviation such as IST
// would be shorter but ambiguous; the IANA name is what the toggle shows.
func InZone(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return ""
	}
	if ZoneName(loc) == "UTC" {
		return UTC(t)
	}
	return t.In(loc).Format("2006-01-02 15:04:05.000") + " " + ZoneName(loc)
}

// PrettyJSON indents stored canonical JSON for reading.
func PrettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

func px(v int) string { return fmt.Sprint(v) }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func curlExample(base string) string {
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	return "curl " + base + `/api/v1/events -H 'Content-Type: application/json' -d '{"type":"attempt","execution_id":"exec_1","step_id":"step-1","attempt":1,"tool":"send_invoice_email","effect":"write","idempotency_key":"ik_1","started_at":"2026-06-30T14:02:11Z","ended_at":"2026-06-30T14:02:12Z","outcome":"ok"}'`
}

// ShortFingerprint is a fingerprint as a table shows it: its kind and the
// first 8 hex digits ("mail:f7e72175…"), enough to tell two rows apart at
// a glance; a fingerprint of another shape is cut at 16 characters.
func ShortFingerprint(fp string) string {
	cut := 16
	if kind, hex, ok := strings.Cut(fp, ":"); ok && len(hex) > 8 && len(kind) < 16 {
		cut = len(kind) + 1 + 8
	}
	if r := []rune(fp); len(r) > cut {
		fp = string(r[:cut]) + "…"
	}
	return Visible(fp)
}
