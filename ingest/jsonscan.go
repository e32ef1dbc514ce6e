package ingest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Decoding JSON into Go values costs far more memory than the JSON takes:
// each element of [0,0,0,...] is two bytes on the wire and some sixty as an
// element of a []any. So a body is first walked by jsonScanner, which
// validates it and measures its shape without building anything, and only
// a value within the limits is decoded.

// maxJSONNesting is encoding/json's own nesting limit: deeper input is an
// error there, so it is reported as encoding/json reports it.
const maxJSONNesting = 10000

// jsonShape bounds the shape of one JSON value. Zero means no limit.
type jsonShape struct {
	Depth int // arrays and objects nested, the outermost counted
	// DepthShown is Depth as errors state it, when it is counted from
	// elsewhere (an event's, from inside its fields).
	DepthShown int
	Elements   int // elements of one array, or keys of one object
	Values     int // values below the outermost container's own members
	// RootElements replaces Elements for the outermost container.
	RootElements int
	DupKeys      bool // refuse an object that has a key twice
	// Root names the outermost value in errors ("event").
	Root string
}

// errJSONSyntax means the bytes are not JSON; the caller reports
// encoding/json's own message for them.
var errJSONSyntax = errors.New("json: syntax error")

// jsonShapeError is a value over a limit of its jsonShape, or an object
// with a key twice: "args.to: duplicate key".
type jsonShapeError struct {
	Path    string
	Problem string
}

func (e *jsonShapeError) Error() string { return e.Path + ": " + e.Problem }

// jsonStats is what a scan measured.
type jsonStats struct {
	Values int // every value, the outermost one included
	Keys   int // every key of every object
}

// scanFrame is one open array or object.
type scanFrame struct {
	array bool
	start int // offset of its '[' or '{'
	n     int // elements or keys so far
	// Where it sits in its parent: a key (escaped, as in the JSON) or an index.
	key   []byte
	index int
	// keys seen, for duplicate detection: a list while short, then a set.
	keys   [][]byte
	keySet map[string]struct{}
	// curKey is the key whose value is being read (objects).
	curKey []byte
}

// jsonScanner walks one JSON value. It allocates only its frames and, when
// it looks for duplicates, the key sets of large objects.
type jsonScanner struct {
	shape jsonShape
	// member, when set, is called for each member of the outermost
	// container: its key as it appears in the JSON without the quotes (nil
	// in an array) and its value's bytes. An error stops the scan.
	member func(key, value []byte) error

	data   []byte
	frames []scanFrame
	stats  jsonStats
	nested int // values below the outermost container's members
}

// scanJSON validates data as one JSON value (surrounding white space
// allowed) within shape. It returns errJSONSyntax for bytes that are not
// JSON, a *jsonShapeError for a value over a limit, or what member
// returned. The scan stops at the first of these.
func scanJSON(data []byte, shape jsonShape, member func(key, value []byte) error) (jsonStats, error) {
	s := jsonScanner{shape: shape, member: member, data: data, frames: make([]scanFrame, 0, 8)}
	err := s.scan()
	return s.stats, err
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (s *jsonScanner) skipSpace(pos int) int {
	for pos < len(s.data) && isSpace(s.data[pos]) {
		pos++
	}
	return pos
}

func (s *jsonScanner) scan() error {
	data := s.data
	pos := s.skipSpace(0)
	if pos == len(data) {
		return errJSONSyntax
	}
	for {
		// A value starts at pos.
		if err := s.valueStarts(); err != nil {
			return err
		}
		start := pos
		switch c := data[pos]; c {
		case '{', '[':
			if err := s.push(c == '[', pos); err != nil {
				return err
			}
			pos = s.skipSpace(pos + 1)
			if pos == len(data) {
				return errJSONSyntax
			}
			if (c == '[' && data[pos] == ']') || (c == '{' && data[pos] == '}') {
				s.frames = s.frames[:len(s.frames)-1]
				pos++
				break // an empty container is complete
			}
			if c == '[' {
				if err := s.nextMember(); err != nil {
					return err
				}
				continue // its first element starts at pos
			}
			var err error
			if pos, err = s.key(pos); err != nil {
				return err
			}
			continue
		case '"':
			end, _, ok := s.str(pos)
			if !ok {
				return errJSONSyntax
			}
			pos = end
		case 't':
			if !bytes.HasPrefix(data[pos:], []byte("true")) {
				return errJSONSyntax
			}
			pos += 4
		case 'f':
			if !bytes.HasPrefix(data[pos:], []byte("false")) {
				return errJSONSyntax
			}
			pos += 5
		case 'n':
			if !bytes.HasPrefix(data[pos:], []byte("null")) {
				return errJSONSyntax
			}
			pos += 4
		default:
			end, ok := s.number(pos)
			if !ok {
				return errJSONSyntax
			}
			pos = end
		}
		// A value ended at pos (start is where it began, unless it was a
		// container just closed: then the frame knows). Close containers
		// as long as their closing bracket follows.
		for {
			if err := s.valueEnds(start, pos); err != nil {
				return err
			}
			if len(s.frames) == 0 {
				if s.skipSpace(pos) != len(data) {
					return errJSONSyntax
				}
				return nil
			}
			pos = s.skipSpace(pos)
			if pos == len(data) {
				return errJSONSyntax
			}
			f := &s.frames[len(s.frames)-1]
			c := data[pos]
			if c == ',' {
				pos = s.skipSpace(pos + 1)
				if pos == len(data) {
					return errJSONSyntax
				}
				if !f.array {
					var err error
					if pos, err = s.key(pos); err != nil {
						return err
					}
				} else if err := s.nextMember(); err != nil {
					return err
				}
				break
			}
			if (f.array && c != ']') || (!f.array && c != '}') {
				return errJSONSyntax
			}
			pos++
			start = f.start
			s.frames = s.frames[:len(s.frames)-1]
		}
	}
}

// valueStarts counts a value about to be read.
func (s *jsonScanner) valueStarts() error {
	s.stats.Values++
	if len(s.frames) < 2 {
		return nil
	}
	s.nested++
	if s.shape.Values > 0 && s.nested > s.shape.Values {
		return &jsonShapeError{Path: s.path(len(s.frames), true),
			Problem: fmt.Sprintf("more than the limit of %d values in one %s", s.shape.Values, s.rootName())}
	}
	return nil
}

// valueEnds hands a member of the outermost container to s.member.
func (s *jsonScanner) valueEnds(start, end int) error {
	if len(s.frames) != 1 || s.member == nil {
		return nil
	}
	f := &s.frames[0]
	var key []byte
	if !f.array {
		key = f.curKey
		if key == nil {
			key = []byte{}
		}
	}
	return s.member(key, s.data[start:end])
}

func (s *jsonScanner) push(array bool, pos int) error {
	depth := len(s.frames) + 1
	if depth > maxJSONNesting {
		return errJSONSyntax
	}
	if s.shape.Depth > 0 && depth > s.shape.Depth {
		return &jsonShapeError{Path: s.path(len(s.frames), true),
			Problem: fmt.Sprintf("nested deeper than the limit of %d levels", cmp.Or(s.shape.DepthShown, s.shape.Depth))}
	}
	f := scanFrame{array: array, start: pos}
	if n := len(s.frames); n > 0 {
		parent := &s.frames[n-1]
		if parent.array {
			f.index = parent.n - 1
		} else {
			f.key = parent.curKey
		}
	}
	// Reuse the key list of an earlier frame at this depth.
	if depth <= cap(s.frames) {
		f.keys = s.frames[:depth][depth-1].keys[:0]
	}
	s.frames = append(s.frames, f)
	return nil
}

func (s *jsonScanner) rootName() string {
	if s.shape.Root == "" {
		return "value"
	}
	return s.shape.Root
}

// nextMember counts an element or key of the innermost container.
func (s *jsonScanner) nextMember() error {
	f := &s.frames[len(s.frames)-1]
	f.n++
	limit := s.shape.Elements
	if len(s.frames) == 1 && s.shape.RootElements > 0 {
		limit = s.shape.RootElements
	}
	if limit > 0 && f.n > limit {
		what := "array longer than the limit of %d elements"
		if !f.array {
			what = "object with more than the limit of %d keys"
		}
		return &jsonShapeError{Path: s.path(len(s.frames), false), Problem: fmt.Sprintf(what, limit)}
	}
	return nil
}

// key reads an object's key and its colon, leaving pos at the value.
func (s *jsonScanner) key(pos int) (int, error) {
	data := s.data
	if data[pos] != '"' {
		return 0, errJSONSyntax
	}
	end, escaped, ok := s.str(pos)
	if !ok {
		return 0, errJSONSyntax
	}
	f := &s.frames[len(s.frames)-1]
	f.curKey = data[pos+1 : end-1]
	s.stats.Keys++
	if err := s.nextMember(); err != nil {
		return 0, err
	}
	if s.shape.DupKeys {
		k := f.curKey
		if escaped {
			k = unescapeKey(data[pos:end])
		}
		if f.seen(k) {
			return 0, &jsonShapeError{Path: s.path(len(s.frames), true), Problem: "duplicate key"}
		}
	}
	pos = s.skipSpace(end)
	if pos == len(data) || data[pos] != ':' {
		return 0, errJSONSyntax
	}
	pos = s.skipSpace(pos + 1)
	if pos == len(data) {
		return 0, errJSONSyntax
	}
	return pos, nil
}

// seen records k and reports whether the object had it already.
func (f *scanFrame) seen(k []byte) bool {
	const listMax = 16
	if f.keySet != nil {
		if _, dup := f.keySet[string(k)]; dup {
			return true
		}
		f.keySet[string(k)] = struct{}{}
		return false
	}
	for _, have := range f.keys {
		if bytes.Equal(have, k) {
			return true
		}
	}
	if f.keys == nil {
		f.keys = make([][]byte, 0, listMax)
	}
	if len(f.keys) < listMax {
		f.keys = append(f.keys, k)
		return false
	}
	f.keySet = make(map[string]struct{}, 2*listMax)
	for _, have := range f.keys {
		f.keySet[string(have)] = struct{}{}
	}
	f.keySet[string(k)] = struct{}{}
	return false
}

// unescapeKey decodes a quoted key as encoding/json does (invalid
// surrogates become U+FFFD), so that keys equal once decoded are equal here.
func unescapeKey(quoted []byte) []byte {
	var k string
	if json.Unmarshal(quoted, &k) != nil {
		return quoted
	}
	return []byte(k)
}

// path names the value at depth (the members of frames[depth-1]); withKey
// adds the key or index being read in that frame.
func (s *jsonScanner) path(depth int, withKey bool) string {
	var b []byte
	for i := 1; i < depth; i++ {
		if s.frames[i-1].array {
			b = appendIndex(b, s.frames[i].index)
		} else {
			b = appendKey(b, s.frames[i].key)
		}
	}
	if withKey && depth > 0 {
		f := &s.frames[depth-1]
		if f.array {
			b = appendIndex(b, f.n-1)
		} else {
			b = appendKey(b, f.curKey)
		}
	}
	if len(b) == 0 {
		return s.rootName()
	}
	return string(b)
}

func appendIndex(b []byte, i int) []byte {
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, ']')
}

// appendKey adds .key, or ["key"] for a key that would not read as one.
func appendKey(b []byte, raw []byte) []byte {
	k := raw
	if bytes.IndexByte(raw, '\\') >= 0 {
		k = unescapeKey(append(append([]byte{'"'}, raw...), '"'))
	}
	plain := len(k) > 0
	for _, c := range k {
		if !(c == '_' || c == '-' || c == '$' || c == '@' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80) {
			plain = false
			break
		}
	}
	if !plain {
		b = append(b, '[')
		b = strconv.AppendQuote(b, string(k))
		return append(b, ']')
	}
	if len(b) > 0 {
		b = append(b, '.')
	}
	return append(b, k...)
}

// str reads a string starting at its opening quote; end is past the
// closing one.
func (s *jsonScanner) str(pos int) (end int, escaped, ok bool) {
	data := s.data
	for i := pos + 1; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			i++
			if i == len(data) {
				return 0, false, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(data) {
					return 0, false, false
				}
				for _, h := range data[i+1 : i+5] {
					if !isHex(h) {
						return 0, false, false
					}
				}
				i += 4
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		}
	}
	return 0, false, false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number(pos int) (int, bool) {
	data := s.data
	i := pos
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	default:
		return 0, false
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i == len(data) || !isDigit(data[i]) {
			return 0, false
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i == len(data) || !isDigit(data[i]) {
			return 0, false
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	return i, true
}

// eventShape is lim's shape for one event. The event object is the
// outermost level, so the depth allowed inside its fields is one less.
func eventShape(lim Limits) jsonShape {
	depth := lim.JSONDepth
	if depth > 0 {
		depth++
	}
	return jsonShape{Depth: depth, DepthShown: lim.JSONDepth, Elements: lim.JSONElements, Values: lim.JSONValues,
		RootElements: maxEventFields, DupKeys: true, Root: "event"}
}

// maxEventFields bounds the keys of an event object, whatever the element
// limit: more than any type of event has fields, so that a misspelt one is
// still named by ParseEvent, and few enough that an object of a million
// keys is refused before it is decoded.
const maxEventFields = 64

// checkEventShape refuses an event over a shape limit or with a key twice,
// naming where: "args: array longer than the limit of 10000 elements",
// "args.to: duplicate key". Bytes that are not JSON pass, for the decoder
// to say what is wrong with them as it always has.
func checkEventShape(raw []byte, lim Limits) (jsonStats, error) {
	stats, err := scanJSON(raw, eventShape(lim), nil)
	if errors.Is(err, errJSONSyntax) {
		return stats, nil
	}
	return stats, err
}
