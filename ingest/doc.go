// Package ingest turns wire formats into validated trace events and feeds
// them to the store: it decodes and limits request bodies, derives canonical
// ids, and runs the single writer that commits concurrent requests together
// (group commit). It must not know about HTTP routing or HTML.
package ingest
