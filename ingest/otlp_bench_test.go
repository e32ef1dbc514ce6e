package ingest_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/oncetrace/oncetrace/ingest"
)

// BenchmarkMapOTLPFrameworkFixtures maps every recorded framework export
// (testdata/frameworks: the spans real frameworks send, with their dozens
// of attributes, context spans and HTTP calls), decoded once, to measure
// what reading spans through the span map costs on them.
func BenchmarkMapOTLPFrameworkFixtures(b *testing.B) {
	files, _ := filepath.Glob("testdata/frameworks/*/*/otlp-*.pb")
	if len(files) == 0 {
		b.Fatal("no framework fixtures")
	}
	var requests []ptrace.Traces
	spans := 0
	for _, file := range files {
		pb, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(pb); err != nil {
			b.Fatal(err)
		}
		requests = append(requests, req.Traces())
		spans += req.Traces().SpanCount()
	}
	cfg := ingest.OTLPConfig{Limits: ingest.DefaultLimits}
	b.ReportAllocs()
	for b.Loop() {
		for _, td := range requests {
			ingest.MapOTLP(td, cfg)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
}
