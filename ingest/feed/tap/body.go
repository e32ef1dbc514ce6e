package tap

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"mime"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed"
)

// prefix keeps the first limit bytes of a stream read through it and
// whether the stream ended within them: the only part of a body the tap
// looks at. The stream itself passes on untouched. The Transport reads a
// request body in a goroutine of its own, hence the lock.
type prefix struct {
	mu    sync.Mutex
	limit int64
	buf   []byte
	total int64
	ended bool
}

func newPrefix(limit int64) *prefix { return &prefix{limit: limit} }

func (p *prefix) observe(b []byte, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if room := p.limit - int64(len(p.buf)); room > 0 {
		p.buf = append(p.buf, b[:min(int64(len(b)), room)]...)
	}
	p.total += int64(len(b))
	if err == io.EOF {
		p.ended = true
	}
}

// snapshot returns a copy of the prefix and whether it is the whole
// stream: the stream ended and was no longer than the limit.
func (p *prefix) snapshot() ([]byte, bool) {
	if p == nil {
		return nil, true // no body at all
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.buf), p.ended && p.total <= p.limit
}

// needed is how many more bytes would decide whether the stream fits.
func (p *prefix) needed() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return 0
	}
	return max(p.limit+1-p.total, 0)
}

// peekingBody passes a request body through, keeping its prefix.
type peekingBody struct {
	rc io.ReadCloser
	p  *prefix
}

func (b *peekingBody) Read(buf []byte) (int, error) {
	n, err := b.rc.Read(buf)
	b.p.observe(buf[:n], err)
	return n, err
}

func (b *peekingBody) Close() error { return b.rc.Close() }

// recordingBody passes a response body through, keeping its prefix, and
// calls done once: when the body ends, before the end is passed on, so the
// effect is recorded before the client sees a complete response; or when
// it is closed early (the client left), after reading what is still
// needed of the prefix, within closeDrain.
type recordingBody struct {
	rc   io.ReadCloser
	p    *prefix
	once sync.Once
	done func()
}

// closeDrain bounds how long an early Close waits for the rest of the
// prefix from the upstream.
const closeDrain = 5 * time.Second

func (b *recordingBody) Read(buf []byte) (int, error) {
	n, err := b.rc.Read(buf)
	b.p.observe(buf[:n], err)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *recordingBody) Close() error {
	b.once.Do(func() {
		if n := b.p.needed(); n > 0 {
			stop := time.AfterFunc(closeDrain, func() { b.rc.Close() })
			drain(b.rc, b.p, n)
			stop.Stop()
		}
		b.done()
	})
	return b.rc.Close()
}

// drain reads up to n bytes of r into p, and stops at the end or an error.
func drain(r io.Reader, p *prefix, n int64) {
	buf := make([]byte, 32<<10)
	for n > 0 {
		k, err := r.Read(buf[:min(int64(len(buf)), n)])
		p.observe(buf[:k], err)
		n -= int64(k)
		if err != nil {
			return
		}
	}
}

// decoded undoes a response's Content-Encoding (gzip or deflate) for the
// tap's own reading, within limit bytes; ok is false when it cannot.
func decoded(contentEncoding string, data []byte, limit int64) ([]byte, bool) {
	var r io.Reader
	switch strings.ToLower(strings.TrimSpace(contentEncoding)) {
	case "", "identity":
		return data, true
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, false
		}
		r = zr
	case "deflate":
		zr, err := zlib.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, false
		}
		r = zr
	default:
		return nil, false // br, zstd, a chain of codings: the tap does not read them
	}
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil || int64(len(out)) > limit {
		return nil, false
	}
	return out, true
}

// field reads a field of a body: a dotted path into JSON (a number picks an
// array element: personalizations.0.to.0.email), or a form field by its
// exact name in an application/x-www-form-urlencoded body (Stripe's
// requests, such as metadata[order]). A string or a number is returned as
// text; anything else is not a field value.
func field(contentType string, data []byte, path string) (string, bool) {
	if path == "" || len(data) == 0 {
		return "", false
	}
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(data))
		if err != nil || !form.Has(path) {
			return "", false
		}
		return form.Get(path), true
	}
	return feed.JSONValueAt(data, strings.Split(path, "."))
}
