package views

import (
	"bytes"
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

// UTC is the machine-readable and hover form of a time.
func UTC(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// ISO is the datetime attribute of a <time>: the script turns it into the
// browser's zone; without the script the UTC text stays.
func ISO(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

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

func pct(v float64) string { return trimZero(fmt.Sprintf("%.3f", v)) + "%" }

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
