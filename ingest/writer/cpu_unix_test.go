//go:build unix

package writer_test

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU this process has used so far:
// what a benchmark measures when other processes share the machine, which
// stretches wall time but not this.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
