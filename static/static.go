// Package static holds the stylesheet and the small hand-written scripts,
// embedded so that the binary serves them with nothing beside it.
package static

import "embed"

// Files are served under /static/.
//
//go:embed css js
var Files embed.FS
