// Package ingest turns wire formats into validated trace events: it decodes
// native JSON and NDJSON events and maps OTLP spans, reading each span's
// role and fields through a span map of framework dialects that is data
// (spandialects.json, extended by serve --span-map); it bounds request
// bodies and events by their limits and the decode budget, redacts secrets,
// classifies tools, and derives canonical ids. It is pure decoding, so that
// its parsers can be fuzzed without a database: of oncetrace it imports
// trace alone, never the store (storing events is ingest/writer's job) nor
// web, and it knows nothing of HTTP routing or HTML.
//
// It is the ground floor of the pipeline under it, whose layers say what
// they may import (TestLayers holds them to it): ingest/feed/… the feeds,
// which write through ingest/writer and never import the store;
// ingest/writer, the single writer, which imports no web.
package ingest
