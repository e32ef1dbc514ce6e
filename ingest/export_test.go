package ingest

// Waiting is how many requests wait for a share of the budget: a test
// acts once a request waits, rather than sleeping and hoping it does.
func (b *DecodeBudget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}
