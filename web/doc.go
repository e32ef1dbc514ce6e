// Package web is oncetrace's HTTP server (echo): routes, handlers, the
// error handler and access control. Handlers bind, call the store or the
// ingest writer, and render; they hold no SQL and no audit logic.
package web
