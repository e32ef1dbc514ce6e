// Package alert posts a message to a webhook (Slack's incoming webhooks,
// or anything that takes JSON) once for each new critical finding the
// writer commits (serve --alert-webhook). Delivery happens on its own
// goroutine from a bounded queue, with retries and exponential backoff.
//
// It must never make ingest wait: Notify runs on the writer's goroutine and
// only queues; a finding that finds the queue full is dropped and counted.
// It knows nothing of HTTP serving or of Prometheus (web reads its Counts).
package alert
