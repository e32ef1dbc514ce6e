// Package static holds the stylesheet, the small hand-written scripts and
// the favicon, embedded so that the binary serves them with nothing beside
// it.
package static

import "embed"

// Files are served under /static/.
//
//go:embed css js favicon.svg
var Files embed.FS

// Favicon is the brand mark, also served as /favicon.ico.
//
//go:embed favicon.svg
var Favicon []byte
