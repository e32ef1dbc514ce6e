// Package trace is oncetrace's domain: executions, steps, attempts, effects,
// and the pure analysis over them — derived attempt outcomes, gaps, and the
// audit rules that turn a trace into findings.
//
// It imports nothing of the application (TestLayers in package ingest
// checks it) and does no I/O: the store loads these types, the analysis
// reads them, and the same functions serve the server, the CLI and the
// tests.
package trace
