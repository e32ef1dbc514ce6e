// Package ingest turns wire formats into validated trace events: it decodes
// native JSON and NDJSON events and maps OTLP spans, reading each span's
// role and fields through a span map of framework dialects that is data
// (spandialects.json, extended by serve --span-map); it bounds request
// bodies and events by their limits and the decode budget, redacts secrets,
// classifies tools, and derives canonical ids. It is pure decoding, so that
// its parsers can be fuzzed without a database: it must not import the
// store (storing events is ingest/writer's job), nor know about HTTP
// routing or HTML.
package ingest
