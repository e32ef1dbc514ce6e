package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/oncetrace/oncetrace/ingest"
)

// spanMapFlags are the span map files of --span-map (and
// ONCETRACE_SPAN_MAP), in order: each adds dialects to the built-in span
// map, or replaces one of the same name (docs/otlp.md § "The span map").
type spanMapFlags struct {
	files []string
}

func (s *spanMapFlags) register(fs *flag.FlagSet) {
	if file := os.Getenv("ONCETRACE_SPAN_MAP"); file != "" {
		s.files = append(s.files, file)
	}
	fs.Func("span-map", "a JSON file of span dialects (how a framework's OpenTelemetry spans say tool call, model call and their fields), "+
		"tried before the built-in ones; an entry named like a built-in one replaces it (repeatable; see docs/otlp.md) (env ONCETRACE_SPAN_MAP)",
		func(v string) error {
			s.files = append(s.files, v)
			return nil
		})
}

// spanMap reads and checks the files, so that a mistake fails at start-up
// with the file, the entry and the key named; nil without files (the
// built-in map).
func (s *spanMapFlags) spanMap(command string) (*ingest.SpanMap, error) {
	if len(s.files) == 0 {
		return nil, nil
	}
	var extra []ingest.SpanDialects
	for _, file := range s.files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: --span-map: %w", command, err)
		}
		d, err := ingest.ParseSpanDialects(data)
		if err != nil {
			return nil, fmt.Errorf("%s: --span-map %s: %w", command, file, err)
		}
		extra = append(extra, d)
	}
	return ingest.NewSpanMap(extra...), nil
}
