// Package feed is what every feed shares. A feed is an adapter that turns
// someone else's side effect into events, one package under this one each:
// the sandbox mail API (sandbox), the recording proxy (tap), provider
// webhooks (webhook) and the SMTP sink (smtpsink). Each records what a
// provider did as an effect through a Recorder: the writer's
// (WriterRecorder), a server's over HTTP (HTTPRecorder), or a disk Queue in
// front of either (QueuedRecorder). A feed that sees more than effects (a
// proxy of tool calls records each call's attempt too) records batches of
// native events the same ways: both recorders are EventRecorders, and a
// QueuedEventRecorder keeps the batches it could not record in an
// EventQueue; one RetryingRecorder and one DiskQueue serve both. The W3C
// trace context of the request that caused it is read the same way for all
// (TraceContext), and what it asked is fingerprinted the same way
// (HTTPRequest, Mail). It does no HTTP serving of its own.
//
// Feeds write through the writer, never the store: this package and those
// under it must not import store or web. A feed that must keep or read
// something beside its effects declares a small interface that cmd/oncetrace
// or web satisfies (smtpsink.MessageStore). ingest's TestLayers checks it.
package feed
