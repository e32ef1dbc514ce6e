package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/oncetrace/oncetrace/ingest"
)

// decodeFlags are serve's flags for what decoding request bodies may cost:
// the decode budget, and the limits on the shape of OTLP requests; those on
// the shape of events are registerEventLimitFlags' (docs/security.md §
// "Memory under hostile input").
type decodeFlags struct {
	maxBytes int64 // --max-decode-bytes
	envErr   error // a malformed ONCETRACE_MAX_DECODE_BYTES, reported by check
}

func (d *decodeFlags) register(fs *flag.FlagSet, lim *ingest.Limits) {
	d.maxBytes = ingest.DefaultDecodeBytes
	if v := os.Getenv("ONCETRACE_MAX_DECODE_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			d.envErr = fmt.Errorf("serve: ONCETRACE_MAX_DECODE_BYTES=%q: want a number of bytes above 0", v)
		}
		d.maxBytes = n
	}
	fs.Int64Var(&d.maxBytes, "max-decode-bytes", d.maxBytes,
		"memory budget of the request bodies being read, decoded and written at once; a request that does not get its share within 2s is answered 503 with Retry-After (env ONCETRACE_MAX_DECODE_BYTES)")
	fs.IntVar(&lim.Spans, "max-spans", lim.Spans, "most spans in one OTLP request (413 beyond; 0: no limit)")
	fs.IntVar(&lim.SpanAttributes, "max-span-attributes", lim.SpanAttributes, "most attributes of one span, span event, link, resource or scope in an OTLP request (0: no limit)")
	fs.IntVar(&lim.SpanEvents, "max-span-events", lim.SpanEvents, "most events, and most links, of one span in an OTLP request (0: no limit)")
	fs.IntVar(&lim.AttributeBytes, "max-attribute-bytes", lim.AttributeBytes, "largest OTLP attribute value of a span, span event, link, resource or scope (0: no limit)")
}

// registerEventLimitFlags registers the limits on one event's fields and
// JSON shape. serve and import both take them: an export holds events
// accepted under serve's limits, and import, which checks every event as
// serve does, needs the same ones to accept them (docs/configuration.md).
func registerEventLimitFlags(fs *flag.FlagSet, lim *ingest.Limits) {
	fs.IntVar(&lim.IDBytes, "max-id-bytes", lim.IDBytes, "longest id, key, provider or worker")
	fs.IntVar(&lim.JSONBytes, "max-json-bytes", lim.JSONBytes, "largest args or result, as canonical JSON")
	fs.IntVar(&lim.TextBytes, "max-text-bytes", lim.TextBytes, "longest name, tool, target or error")
	fs.IntVar(&lim.Labels, "max-labels", lim.Labels, "most labels on an execution")
	fs.IntVar(&lim.JSONDepth, "max-json-depth", lim.JSONDepth, "deepest nesting of arrays and objects in an event's args, result or labels (0: no limit)")
	fs.IntVar(&lim.JSONElements, "max-json-elements", lim.JSONElements, "most elements of one array, or keys of one object, in an event (0: no limit)")
	fs.IntVar(&lim.JSONValues, "max-json-values", lim.JSONValues, "most JSON values inside the fields of one event, all together (0: no limit)")
}

func (d *decodeFlags) check(bodyBytes int64) error {
	if d.envErr != nil {
		return d.envErr
	}
	if d.maxBytes <= 0 {
		return fmt.Errorf("serve: --max-decode-bytes %d: want a number of bytes above 0", d.maxBytes)
	}
	// A body of the largest size must fit: read, decoded and held until
	// committed, about seven times its size for ordinary events.
	if min := 8 * bodyBytes; d.maxBytes < min {
		return fmt.Errorf("serve: --max-decode-bytes %d is less than 8 × --max-body-bytes (%d): the largest bodies could never be decoded", d.maxBytes, min)
	}
	return nil
}

// memoryLimitHeadroom is the soft memory limit of the Go runtime above the
// decode budget: the rest of the server (SQLite's cache, the writer, live
// clients) and the garbage of decoding, which the collector then reclaims
// sooner, so that a budget held in full does not double the process's
// size before the next collection.
const memoryLimitHeadroom = 64 << 20

// applyMemoryLimit sets the Go runtime's soft memory limit to the decode
// budget plus headroom, unless GOMEMLIMIT says otherwise. It is soft: a
// server that needs more gets more, and collects more often first.
func (d *decodeFlags) applyMemoryLimit(logger *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		logger.Info("oncetrace memory", "max_decode_bytes", d.maxBytes, "gomemlimit", "from GOMEMLIMIT")
		return
	}
	limit := d.maxBytes + memoryLimitHeadroom
	debug.SetMemoryLimit(limit)
	logger.Info("oncetrace memory", "max_decode_bytes", d.maxBytes, "gomemlimit", limit)
}
