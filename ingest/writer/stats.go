package writer

import "time"

// BatchStats is what one writer transaction did: how many requests and
// events it carried, how many events it stored and found already stored,
// how long it took from BEGIN to COMMIT (or to the failure), and the error
// that failed it, if any.
type BatchStats struct {
	Requests   int
	Events     int
	Accepted   int
	Duplicates int
	Duration   time.Duration
	Err        error
}

func batchStats(group []*request, results []requestDone, took time.Duration, err error) BatchStats {
	st := BatchStats{Requests: len(group), Duration: took, Err: err}
	for i, req := range group {
		st.Events += len(req.events)
		if err == nil && results[i].err == nil {
			st.Accepted += results[i].result.Accepted
			st.Duplicates += results[i].result.Duplicates
		}
	}
	return st
}

// QueueDepth is how many requests wait for the writer right now.
func (w *Writer) QueueDepth() int { return len(w.queue) }

// QueueCapacity is how many requests may wait for the writer.
func (w *Writer) QueueCapacity() int { return cap(w.queue) }
