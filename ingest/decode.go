package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// RequestError is a problem with a request as a whole: nothing of it is
// stored. Status is the HTTP status it maps to.
type RequestError struct {
	Status int
	Msg    string // names the field or header and the limit
}

func (e *RequestError) Error() string { return e.Msg }

func requestError(status int, format string, args ...any) *RequestError {
	return &RequestError{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// Rejection is one event refused by its index in the request.
type Rejection struct {
	Index int    `json:"index"`
	Error string `json:"error"`
}

// Batch is a decoded request: the valid events, and the rejected ones by index.
type Batch struct {
	Events   []trace.Event
	Rejected []Rejection
}

// Format is a request body's wire format.
type Format int

const (
	FormatJSON   Format = iota // one event, {"events":[...]}, or [...]
	FormatNDJSON               // one event a line
)

// FormatOf maps a Content-Type header to a format; an empty type is JSON.
func FormatOf(contentType string) (Format, error) {
	if contentType == "" {
		return FormatJSON, nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, requestError(http.StatusUnsupportedMediaType, "Content-Type: cannot parse %q", contentType)
	}
	switch mt {
	case "application/json":
		return FormatJSON, nil
	case "application/x-ndjson", "application/ndjson", "application/jsonl":
		return FormatNDJSON, nil
	}
	return 0, requestError(http.StatusUnsupportedMediaType, "Content-Type: %s is not supported; send application/json or application/x-ndjson", mt)
}

// ReadBody reads a request body, undoing Content-Encoding, and refuses more
// than limit bytes after decompression so that a small gzip bomb cannot
// exhaust memory.
func ReadBody(body io.Reader, contentEncoding string, limit int64) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(contentEncoding)) {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, gzipError(err)
		}
		defer zr.Close()
		body = zr
	default:
		return nil, requestError(http.StatusUnsupportedMediaType, "Content-Encoding: %s is not supported; send gzip or identity", contentEncoding)
	}
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, requestError(http.StatusRequestEntityTooLarge, "body: larger than the limit of %d bytes", tooLarge.Limit)
		}
		if _, gzipped := body.(*gzip.Reader); gzipped {
			return nil, gzipError(err)
		}
		return nil, requestError(http.StatusBadRequest, "body: %v", err)
	}
	if int64(len(data)) > limit {
		return nil, requestError(http.StatusRequestEntityTooLarge, "body: larger than the limit of %d bytes", limit)
	}
	return data, nil
}

func gzipError(err error) error {
	return requestError(http.StatusBadRequest, "body: Content-Encoding is gzip but the body is not valid gzip: %v", err)
}

// Decode splits a body into events and validates each one. A body that is
// not parseable at all is a RequestError; an invalid event is a Rejection.
func Decode(data []byte, format Format, lim Limits) (Batch, error) {
	return DecodeWithin(context.Background(), nil, data, format, lim)
}

// DecodeWithin is Decode holding res (which may be nil) while it decodes:
// each event's shape is checked first, which costs nothing, and res grows
// to what decoding the events that passed and holding them will take
// (eventsEstimate) before any is decoded.
func DecodeWithin(ctx context.Context, res *Reservation, data []byte, format Format, lim Limits) (Batch, error) {
	raws, err := split(data, format, lim)
	if err != nil {
		return Batch{}, err
	}
	prechecked := make([]error, len(raws))
	est := eventsEstimate{body: int64(cap(data))}
	for i, raw := range raws {
		stats, err := precheckEvent(raw, lim)
		prechecked[i] = err
		if err == nil {
			est.add(len(raw), stats)
		}
	}
	if err := res.Resize(ctx, est.bytes()); err != nil {
		return Batch{}, err
	}
	b := Batch{Events: make([]trace.Event, 0, len(raws))}
	for i, raw := range raws {
		err := prechecked[i]
		if err == nil {
			var ev trace.Event
			if ev, err = parseChecked(raw, lim); err == nil {
				b.Events = append(b.Events, ev)
				continue
			}
		}
		b.Rejected = append(b.Rejected, Rejection{Index: i, Error: err.Error()})
	}
	return b, nil
}

func split(data []byte, format Format, lim Limits) ([]json.RawMessage, error) {
	if format == FormatNDJSON {
		var raws []json.RawMessage
		// Lines are slices of data itself: a bufio.Scanner would reuse its
		// buffer and overwrite the lines already kept.
		for line := range bytes.Lines(data) {
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			if len(raws) == lim.Events {
				return nil, tooManyEvents(lim)
			}
			raws = append(raws, json.RawMessage(line))
		}
		if len(raws) == 0 {
			return nil, requestError(http.StatusBadRequest, "body: no events")
		}
		return raws, nil
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, requestError(http.StatusBadRequest, "body: empty; send one event, {\"events\":[...]}, or NDJSON")
	}
	// The body is walked, not decoded: each event stays a slice of data,
	// and a huge array costs nothing before it is refused.
	var raws []json.RawMessage
	var err error
	switch data[0] {
	case '[':
		if raws, err = jsonElements(data, lim); err != nil {
			return nil, err
		}
	case '{':
		// Keys match exactly, as in events, so that {"Events":[...]} is not
		// taken for an envelope.
		var events []byte
		var hasType, twice bool
		_, err := scanJSON(data, jsonShape{}, func(key, value []byte) error {
			switch {
			case keyIs(key, "events"):
				twice = twice || events != nil
				events = value
			case keyIs(key, "type"):
				hasType = true
			}
			return nil
		})
		switch {
		case err != nil:
			return nil, invalidJSON(syntaxError(data))
		case events == nil || hasType:
			raws = []json.RawMessage{data}
		case twice:
			return nil, requestError(http.StatusBadRequest, "events: duplicate key; send one array of events")
		case string(events) == "null":
		case events[0] != '[':
			return nil, requestError(http.StatusBadRequest, "events: must be an array of event objects")
		default:
			if raws, err = jsonElements(events, lim); err != nil {
				return nil, err
			}
		}
	default:
		return nil, requestError(http.StatusBadRequest, "body: must be a JSON object, an array, or NDJSON with Content-Type application/x-ndjson")
	}
	if len(raws) == 0 {
		return nil, requestError(http.StatusBadRequest, "events: empty; send at least one event")
	}
	return raws, nil
}

func tooManyEvents(lim Limits) error {
	return requestError(http.StatusRequestEntityTooLarge, "events: more than the limit of %d events in one request", lim.Events)
}

func invalidJSON(err error) error {
	return requestError(http.StatusBadRequest, "body: invalid JSON: %v", err)
}

// jsonElements are the elements of a JSON array, as slices of it. More
// than lim.Events is a 413, but only for an array that is JSON all along:
// a body that is not parseable is a 400 whatever its length.
func jsonElements(array []byte, lim Limits) ([]json.RawMessage, error) {
	var raws []json.RawMessage
	over := false
	_, err := scanJSON(array, jsonShape{}, func(_, value []byte) error {
		if len(raws) == lim.Events {
			over = true
		} else {
			raws = append(raws, value)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, invalidJSON(syntaxError(array))
	case over:
		return nil, tooManyEvents(lim)
	}
	return raws, nil
}

// syntaxError is encoding/json's own words for bytes that are not JSON.
func syntaxError(data []byte) error {
	var v json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	return errors.New("not a JSON value")
}

// keyIs reports whether a key, as it appears in the JSON without its
// quotes, is name once unescaped.
func keyIs(raw []byte, name string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == name
	}
	return string(unescapeKey(append(append([]byte{'"'}, raw...), '"'))) == name
}
