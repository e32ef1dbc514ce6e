// Package sandbox is a real mail API built into oncetrace, for the demo and
// for users testing their own agents. It follows Stripe's idempotency
// contract and can lose responses, fail or slow down on purpose, so that the
// failures retries cause can be reproduced for real. Every delivery is
// reported to an EffectRecorder, which oncetrace feeds into its own ingest.
//
// It is a feed (package feed): it must not import the store or web. web
// mounts its handlers (ServeSend, ServeFaults) and hands it the writer's
// recorder; the tap borrows its faults.
package sandbox
