//go:build unix

package main

import "syscall"

// raiseOpenFiles lifts the soft limit on open files to the hard limit: a
// thousand live clients are two thousand sockets in this process, beyond
// the usual soft limit of 1,024. It returns the limit now in force.
func raiseOpenFiles() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return uint64(lim.Cur), nil
}
