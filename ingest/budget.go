package ingest

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A request body costs memory three times: its bytes, what decoding them
// builds, and the events it becomes until they are committed. Nothing else
// bounds how many requests do that at once, so a few large ones can take
// the server's memory. A DecodeBudget bounds it: each request reserves an
// estimate of what it will hold before it holds it, and waits (a bounded
// time) when others hold the rest.

// DefaultDecodeBytes is the default decode budget: with the Go runtime's
// own overhead, a server at its limit stays under about 256 MB.
const DefaultDecodeBytes = 128 << 20

// DefaultDecodeWait is how long a request waits for its share of the decode
// budget before it is answered 503.
const DefaultDecodeWait = 2 * time.Second

// ErrDecodeBusy is a request that waited for its share of the decode budget
// and did not get it: others are holding it. Retrying later is right.
var ErrDecodeBusy = errors.New("ingest: the server is decoding as many requests as its memory budget allows; retry after the Retry-After delay")

// DecodeBudget is a semaphore on the bytes requests may hold while they are
// read, decoded and written. Waiters are served in order, so a large
// request is not starved by a stream of small ones.
type DecodeBudget struct {
	capacity int64
	wait     time.Duration

	mu      sync.Mutex
	used    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

// NewDecodeBudget makes a budget of capacity bytes (DefaultDecodeBytes
// when ≤ 0); a request waits at most wait (DefaultDecodeWait when ≤ 0).
func NewDecodeBudget(capacity int64, wait time.Duration) *DecodeBudget {
	if capacity <= 0 {
		capacity = DefaultDecodeBytes
	}
	if wait <= 0 {
		wait = DefaultDecodeWait
	}
	return &DecodeBudget{capacity: capacity, wait: wait}
}

// Capacity is the budget's size in bytes.
func (b *DecodeBudget) Capacity() int64 { return b.capacity }

// InUse is what requests hold now.
func (b *DecodeBudget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Reserve starts a request's reservation with n bytes.
func (b *DecodeBudget) Reserve(ctx context.Context, n int64) (*Reservation, error) {
	r := &Reservation{budget: b}
	if err := r.Resize(ctx, n); err != nil {
		return nil, err
	}
	return r, nil
}

// TryReserve takes n bytes only if they are free now and no request is
// waiting for its share, else returns nil: for work that may be left
// undone (the web's models built ahead), which must never make a request
// wait.
func (b *DecodeBudget) TryReserve(n int64) *Reservation {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 || b.used+n > b.capacity {
		return nil
	}
	b.used += n
	return &Reservation{budget: b, n: n}
}

func (b *DecodeBudget) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.capacity {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-timer.C:
		err = ErrDecodeBusy
	case <-ctx.Done():
		err = fmt.Errorf("%w: %w", ErrDecodeBusy, ctx.Err())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted while the timer fired
		return nil
	default:
	}
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.grant() // the waiter gone may have blocked smaller ones behind it
	return err
}

func (b *DecodeBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.grant()
}

// grant serves waiters in order while the budget has room; b.mu is held.
func (b *DecodeBudget) grant() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.capacity {
			return
		}
		b.used += w.n
		close(w.ready)
		b.waiters = b.waiters[1:]
	}
}

// Reservation is one request's share of a DecodeBudget. A nil
// *Reservation reserves nothing and may be used freely.
type Reservation struct {
	budget *DecodeBudget
	n      int64
}

// Bytes is what the reservation holds.
func (r *Reservation) Bytes() int64 {
	if r == nil {
		return 0
	}
	return r.n
}

// Resize makes the reservation n bytes: more waits for the budget (at
// most its wait, then ErrDecodeBusy); less gives the difference back. More
// than the whole budget is a 413: the request could never be decoded.
func (r *Reservation) Resize(ctx context.Context, n int64) error {
	if r == nil {
		return nil
	}
	switch b := r.budget; {
	case n > b.capacity:
		return requestError(http.StatusRequestEntityTooLarge,
			"body: decoding it would take about %d bytes of memory, more than the decode budget of %d bytes (serve --max-decode-bytes)", n, b.capacity)
	case n > r.n:
		if err := b.acquire(ctx, n-r.n); err != nil {
			return err
		}
	case n < r.n:
		b.release(r.n - n)
	}
	r.n = n
	return nil
}

// Release gives everything back; calling it again does nothing.
func (r *Reservation) Release() {
	if r == nil || r.n == 0 {
		return
	}
	r.budget.release(r.n)
	r.n = 0
}

// Reading a body of unknown length (gzipped, or chunked) appends chunks
// of growing size, up to maxBodyChunk, and copies them into one slice at
// the end: twice the body at the peak, and no buffer twice the size of
// the body for good, as a doubling buffer leaves.
const (
	minBodyChunk  = 64 << 10
	maxBodyChunk  = 1 << 20
	bodyReadBytes = 2 // reserved per byte read: the chunks and the copy
)

// ReadBodyWithin is ReadBody holding res (which may be nil) while it
// reads: before more of the body (after decompression) is read, res grows
// to cover it, so a request never holds memory it has not reserved.
// contentLength is the request's (-1 when unknown); with no
// Content-Encoding it is reserved at once and read into one allocation of
// that size. The slice returned has no spare capacity.
func ReadBodyWithin(ctx context.Context, res *Reservation, body io.Reader, contentEncoding string, contentLength, limit int64) ([]byte, error) {
	identity := false
	switch strings.ToLower(strings.TrimSpace(contentEncoding)) {
	case "", "identity":
		identity = true
	case "gzip", "x-gzip":
	default:
		return ReadBody(body, contentEncoding, limit) // the 415, as ReadBody words it
	}
	if identity && contentLength > limit {
		return nil, requestError(http.StatusRequestEntityTooLarge, "body: larger than the limit of %d bytes", limit)
	}
	var zr *gzip.Reader
	if !identity {
		var err error
		if zr, err = gzip.NewReader(body); err != nil {
			return nil, gzipError(err)
		}
		defer zr.Close()
		body = zr
	}
	rr := &reservingReader{ctx: ctx, r: io.LimitReader(body, limit+1), res: res, max: limit + 1}
	first := int64(minBodyChunk)
	if identity && contentLength >= 0 {
		// The announced size and one byte more, to see a body longer than
		// announced (which net/http refuses anyway): one chunk, no copy.
		first = contentLength + 1
		if err := res.Resize(ctx, res.Bytes()+first); err != nil {
			return nil, err
		}
		rr.covered = first
	} else if err := res.Resize(ctx, res.Bytes()+maxBodyChunk); err != nil {
		return nil, err // the last chunk's unread part
	}
	rr.base = res.Bytes()
	data, err := readChunks(rr, first)
	if err != nil {
		var tooLarge *http.MaxBytesError
		var re *RequestError
		switch {
		case errors.As(err, &re), errors.Is(err, ErrDecodeBusy):
			return nil, err
		case errors.As(err, &tooLarge):
			return nil, requestError(http.StatusRequestEntityTooLarge, "body: larger than the limit of %d bytes", tooLarge.Limit)
		case zr != nil:
			return nil, gzipError(err)
		}
		return nil, requestError(http.StatusBadRequest, "body: %v", err)
	}
	if int64(len(data)) > limit {
		return nil, requestError(http.StatusRequestEntityTooLarge, "body: larger than the limit of %d bytes", limit)
	}
	return data, nil
}

// readChunks reads r to its end into chunks, the first of size first.
func readChunks(r io.Reader, first int64) ([]byte, error) {
	var chunks [][]byte
	total, size := 0, first
	for done := false; !done; {
		chunk := make([]byte, size)
		n := 0
		for n < len(chunk) && !done {
			// Not io.ReadFull: a truncated gzip stream's own
			// io.ErrUnexpectedEOF must stay an error.
			m, err := r.Read(chunk[n:])
			n += m
			switch {
			case err == io.EOF:
				done = true
			case err != nil:
				return nil, err
			}
		}
		total += n
		chunks = append(chunks, chunk[:n:n])
		size = min(max(2*size, minBodyChunk), maxBodyChunk)
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	data := make([]byte, 0, total)
	for _, c := range chunks {
		data = append(data, c...)
	}
	return data, nil
}

// reservingReader grows a reservation ahead of what it reads: the bytes
// covered double each time (bodyReadBytes reserved per byte), so a body
// of n bytes costs a handful of waits, not n.
type reservingReader struct {
	ctx     context.Context
	r       io.Reader
	res     *Reservation
	base    int64 // the reservation before reading
	read    int64
	covered int64 // bytes the reservation covers
	max     int64 // bytes it may read: the limit, and one to see a body over it
}

func (rr *reservingReader) Read(p []byte) (int, error) {
	if rr.res != nil {
		if rr.read >= rr.max {
			return 0, io.EOF
		}
		if rr.read == rr.covered {
			next := min(max(2*rr.covered, minBodyChunk), rr.max)
			if err := rr.res.Resize(rr.ctx, rr.base+bodyReadBytes*next); err != nil {
				return 0, err
			}
			rr.covered = next
		}
		if room := rr.covered - rr.read; int64(len(p)) > room {
			p = p[:room]
		}
	}
	n, err := rr.r.Read(p)
	rr.read += int64(n)
	return n, err
}

// What decoding one event costs at its peak, besides its bytes: the
// decoder's copy of them as it reads (which grows by doubling), each value
// as a Go value (an element of a []any is some sixty bytes), and each key
// as a map entry, with the map's growth and the sorted copy of its keys
// the canonical form makes. Held only while that event is decoded;
// TestDecodeWithinEstimate checks them against measured allocations.
const (
	eventDecodeFactor = 3
	eventValueCost    = 128
	eventKeyCost      = 384
)

// eventKeptFactor is what an event holds, per byte of it, from decoding
// until its commit: its canonical body and its args and result apart
// (about twice its bytes), and what the writer builds from it while it
// commits (its rows, the steps it refolds; measured at about three and a
// half times the body for a batch of 5,000 attempts).
const eventKeptFactor = 5

// eventsEstimate adds up what a request's events hold: the body, every
// event until the events are committed (eventKeptFactor), and the costliest
// event's decoding, since events are decoded one at a time.
type eventsEstimate struct {
	body, kept, peak int64
}

func (e *eventsEstimate) add(size int, stats jsonStats) {
	e.kept += eventKeptFactor * int64(size)
	e.peak = max(e.peak, eventDecodeFactor*int64(size)+eventValueCost*int64(stats.Values)+eventKeyCost*int64(stats.Keys))
}

func (e *eventsEstimate) bytes() int64 { return e.body + e.kept + e.peak }

// JSONDecodeEstimate is about what decoding data into Go values (any)
// holds at its peak besides data: the webhook mappings decode a delivery
// so. It stops counting above ceiling (the decode budget). Bytes that are
// not JSON cost nothing: the decoder stops at once.
func JSONDecodeEstimate(data []byte, ceiling int64) int64 {
	maxValues := int(min(ceiling/eventValueCost, math.MaxInt32))
	stats, err := scanJSON(data, jsonShape{Values: maxValues}, nil)
	var over *jsonShapeError
	switch {
	case errors.As(err, &over):
		return ceiling + 1
	case err != nil:
		return 0
	}
	return int64(len(data)) + eventValueCost*int64(stats.Values) + eventKeyCost*int64(stats.Keys)
}
