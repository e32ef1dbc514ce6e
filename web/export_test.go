package web

// DecodeBytesInUse is what requests hold of the server's decode budget: a
// test acts once a request has reserved its share, rather than sleeping.
func (s *Server) DecodeBytesInUse() int64 { return s.budget.InUse() }
