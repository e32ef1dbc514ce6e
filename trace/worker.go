package trace

import "strings"

// NormaliseWorker is the worker a worker identity names, in the form
// OpenTelemetry resources give it (host.name:process.pid, as
// ingest's span mapping reads it): Temporal's Go SDK identifies a worker
// by default as "PID@HOST@", so a history's ActivityTaskStarted.identity
// "5139@vm@" and a span of that process, "vm:5139", name one worker. Any
// other identity (one the user set) is kept as it is.
func NormaliseWorker(identity string) string {
	rest, ok := strings.CutSuffix(identity, "@")
	if !ok {
		return identity
	}
	pid, host, ok := strings.Cut(rest, "@")
	if !ok || pid == "" || host == "" || strings.Contains(host, "@") {
		return identity
	}
	for _, c := range pid {
		if c < '0' || c > '9' {
			return identity
		}
	}
	return host + ":" + pid
}
