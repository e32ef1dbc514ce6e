// Package temporaldemo is the article's invoice workflow on Temporal: the
// workflow InvoiceWorkflow calls the activity SendInvoiceEmail, which POSTs
// to the sandbox mail API of an oncetrace server through otelhttp (so the
// request carries the activity span's traceparent), and a worker that
// traces with the Go SDK's OpenTelemetry interceptor and exports OTLP/HTTP.
//
// Run plays one scenario (naive, crash, keyed) against a Temporal cluster,
// starting worker processes through a command the caller gives (oncetrace's
// hidden temporal-worker command): `oncetrace demo --temporal` and the
// fixture recorder (recordfixtures, for `make fixtures`) both use it. It is
// a demonstration and a fixture generator, not part of ingest: nothing in
// oncetrace's serving path imports it.
package temporaldemo
