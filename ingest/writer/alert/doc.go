// Package alert posts a message to a webhook (Slack's incoming webhooks,
// or anything that takes JSON) once for each new critical finding the
// writer commits (serve --alert-webhook). Delivery happens on its own
// goroutine from a bounded queue, with retries and exponential backoff.
//
// It must never make ingest wait: Notify runs on the writer's goroutine and
// only queues; a finding that finds the queue full is dropped and counted.
// It knows nothing of HTTP serving or of Prometheus (web reads its Counts).
//
// It lives under the writer because the writer's commits are its only input
// (writer.Commit's NewCritical, handed over by serve's OnCommit) and the
// writer's pace is the contract it keeps; the writer does not import it.
// Of oncetrace it imports trace alone: never the store, web or the writer.
package alert
