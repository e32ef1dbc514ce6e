// Package temporal maps a Temporal workflow history onto oncetrace's
// events: a workflow run is an execution (WORKFLOW_ID/RUN_ID, named after
// the workflow type), each activity, local activity and child workflow a
// step, and what Temporal recorded of its attempts the step's attempts;
// signals, timers and other markers are context spans on the run's
// timeline (docs/temporal.md, "What each history event becomes").
//
// A history holds only the last attempt of a retried activity: one
// ActivityTaskStarted with its attempt number, its worker's identity and
// the previous attempt's failure. MapHistory says exactly that: the last
// attempt with its worker and times, the one before it known by its
// failure alone, the earlier ones by their count; it never invents a time
// or a worker. Traces, mapped elsewhere, fill them in.
//
// Every event's id is derived from the run and the Temporal event ids that
// produced it, so mapping a longer prefix of a growing history gives the
// same events again plus new ones, and re-sending them changes nothing.
// The package reads and maps; it does not talk to a cluster and does not
// write to a store.
package temporal
