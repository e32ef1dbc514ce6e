//go:build race

package store_test

// raceEnabled: the race detector slows the writer about tenfold, so load
// tests use smaller databases under it.
const raceEnabled = true
