package web

// DecodeBytesInUse is what requests hold of the server's decode budget: a
// test acts once a request has reserved its share, rather than sleeping.
func (s *Server) DecodeBytesInUse() int64 { return s.budget.InUse() }

// SetCarryMinItems makes the server carry models of at least n items over
// the commits that cannot change them (execution_carry.go), so that a
// test of small executions exercises it.
func (s *Server) SetCarryMinItems(n int) {
	s.executions.mu.Lock()
	defer s.executions.mu.Unlock()
	s.executions.carryMin = n
}

// HandedOver is how many commits the hub has handed to its watchers (the
// carrying of models among them), or lost.
func (h *Hub) HandedOver() int64 { return h.handled.Load() }
