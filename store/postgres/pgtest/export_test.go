package pgtest

// Dir is the directory of a cluster Start started, for tests of Stop.
func (c *Cluster) Dir() string { return c.dir }
