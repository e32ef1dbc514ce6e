//go:build !unix

package writer_test

import "time"

// processCPU is unknown here: the benchmarks report wall time alone.
func processCPU() (time.Duration, bool) { return 0, false }
