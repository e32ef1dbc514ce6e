package ingest

// Limits bound what one request and one event may carry. Every limit is
// documented in docs/api.md; an event over a limit is rejected by index,
// never truncated.
type Limits struct {
	BodyBytes     int64 // request body, after decompression
	Events        int   // events in one request
	IDBytes       int   // ids, keys, provider and worker names
	JSONBytes     int   // args and result, each, as canonical JSON
	TextBytes     int   // name, tool, target and error
	Labels        int   // entries in an execution's label map
	LabelBytes    int   // one label key or value
	AttemptNumber int   // highest attempt number
}

// DefaultLimits are DESIGN.md's limits.
var DefaultLimits = Limits{
	BodyBytes:     8 << 20,
	Events:        5000,
	IDBytes:       256,
	JSONBytes:     64 << 10,
	TextBytes:     64 << 10,
	Labels:        64,
	LabelBytes:    1024,
	AttemptNumber: 1_000_000,
}
