// Package follow follows a Temporal cluster through its frontend gRPC API
// (serve --temporal): it lists the namespace's running and recently closed
// workflow runs, reads each run's history, maps it to oncetrace events with
// a Mapper (the history mapping, package temporal's MapHistory) and writes
// them through the server's writer, again as the history grows.
//
// How it reads:
//   - A list pass every PollInterval: ListWorkflowExecutions with
//     `ExecutionStatus = 'Running'`, then with `ExecutionStatus !=
//     'Running' AND CloseTime >= CUTOFF`, where CUTOFF is now minus
//     Lookback on the first pass and the last successful pass's start minus
//     a visibility margin afterwards: a closed run is listed about once.
//   - Each running run gets a reader, up to MaxRuns at once, that
//     long-polls its history (GetWorkflowExecutionHistory with
//     WaitNewEvent and the next-page token): a new event arrives within
//     the round trip, and an idle run costs one pending call, not a poll.
//     The reader keeps the run's history in memory, re-maps it when it
//     grows and writes the events whose ids it has not written yet; it
//     ends when the run closes (or errs, and the next pass starts another).
//   - Running runs over the cap are read whole during the pass (without
//     waiting), one at a time, when their history length
//     (DescribeWorkflowExecution: the listing's is the one visibility
//     recorded at the start) differs from the one last read; closed runs
//     are read whole once. They are fresh to within a pass, and memory
//     stays bounded by MaxRuns histories plus one.
//
// Event ids are deterministic (the mapping's), so reading a history again,
// after a reconnect or a restart of oncetrace or of the cluster, writes
// nothing twice. A cluster that cannot be reached is retried with backoff
// (1 s doubling to 30 s); nothing here blocks the server or other ingest:
// it all runs on the follower's own goroutines, every call has a deadline,
// and Status says how far behind it is.
//
// It is a feed: it must not import the store or web.
package follow
