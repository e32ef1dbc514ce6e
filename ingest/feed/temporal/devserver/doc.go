// Package devserver finds, builds and runs the Temporal CLI's development
// server (`temporal server start-dev`) for tests and for recording the
// Temporal fixtures.
//
// The CLI is built from its own module (temporalcli/go.mod), never from the
// project's go.mod, once per version into
// $(dirname GOCACHE)/oncetrace-temporal/temporal-VERSION (Build). Tests call
// Start, which skips with a notice when no binary is there and fails instead
// when ONCETRACE_REQUIRE_TEMPORAL=1 (as CI sets it). Servers listen on free
// 127.0.0.1 ports and are stopped by PID. It must not be imported by
// anything but tests and fixture programs: oncetrace itself never runs a
// Temporal server.
package devserver
