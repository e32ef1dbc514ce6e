// Package web is oncetrace's HTTP server (echo): routes, handlers, the
// error handler and access control. Handlers bind, call the store or the
// ingest writer, and render; they hold no SQL and no audit logic.
//
// Nothing imports web but the commands under cmd/, which wire it; it must
// not import cmd.
package web
