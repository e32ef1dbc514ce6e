package mcp

import (
	"encoding/json"
	"strconv"
)

// A message too long for a proxy to hold (a tool result of megabytes)
// still answers a call, which must be closed. ServerScan reads it as it
// streams through and keeps only what recording the answer needs: its id,
// whether it is an error, isError, and the effect id at the configured
// pointer. It keeps no value longer than maxScalarBytes and no container,
// so its memory does not grow with the message.

// Bounds on what a scan keeps.
const (
	// maxScalarBytes bounds a key or a watched scalar kept whole; a longer
	// one is skipped (an id or an error message that long is not kept).
	maxScalarBytes = 1024
	// maxScanDepth bounds nesting: deeper JSON is not read further.
	maxScanDepth = 10_000
	// maxScanMessages bounds the messages of a batch a scan outlines.
	maxScanMessages = 10_000
)

// ServerScan observes a message the server sent that is too long to hold,
// as it streams: Write its bytes (an HTTP body, an SSE event's data), then
// End. Session.ScanFromServer makes one. It is not safe for concurrent
// use; End takes the observer's lock.
type ServerScan struct {
	s    *Session
	lex  jsonLexer
	size int64
}

// ScanFromServer begins the scan of a message from the server too long
// to hold.
func (s *Session) ScanFromServer() *ServerScan {
	sc := &ServerScan{s: s}
	sc.lex.targets = make([]path, numTargets)
	sc.lex.targets[tID], sc.lex.targets[tErrCode], sc.lex.targets[tErrMessage], sc.lex.targets[tIsError] = pathID, pathErrCode, pathErrMessage, pathIsError
	sc.lex.targets[tEffectID] = append(path{{key: "result", index: -1}}, tokens(s.o.pointer)...)
	return sc
}

// Write reads more of the message; it never fails.
func (sc *ServerScan) Write(p []byte) (int, error) {
	sc.size += int64(len(p))
	sc.lex.write(p)
	return len(p), nil
}

// ID is the id of the answer read: of the message's first answer once it
// is read whole, else of the one being read once its id has been read.
func (sc *ServerScan) ID() (json.RawMessage, bool) {
	for _, o := range sc.lex.outlines {
		if !o.method && hasID(o.id) {
			return o.id, true
		}
	}
	if o := sc.lex.msg; len(sc.lex.frames) > 0 && !o.method && hasID(o.id) {
		return o.id, true
	}
	return nil, false
}

// Struck says the message being read answers a call lose-response struck,
// as far as its id, read already, tells: the rest of it can be withheld
// (the Go SDK writes the id first; the TypeScript SDK last, too late).
func (sc *ServerScan) Struck() bool {
	id, ok := sc.ID()
	if !ok {
		return false
	}
	o := sc.s.o
	o.mu.Lock()
	defer o.mu.Unlock()
	pc := sc.s.pending[idKey(id)]
	return pc != nil && pc.dropAnswer
}

// End records the calls the message answered, as FromServer does for a
// message held whole, their results left out but for isError and the
// effect id. delivered says the client got the message: a call
// lose-response struck is then recorded as answered, and missed says so
// (it streamed through before its id was read). Else it was withheld for
// the fault, as FromServer's drop has it.
func (sc *ServerScan) End(delivered bool) (missed bool) {
	return sc.end(delivery{passed: delivered, large: true})
}

// EndUndelivered is End for a message the client never gets for another
// reason, why (as Undelivered).
func (sc *ServerScan) EndUndelivered(why string) {
	sc.end(delivery{withheld: why, large: true})
}

func (sc *ServerScan) end(d delivery) (missed bool) {
	lx := &sc.lex
	if lx.st != stAfter || len(lx.frames) != 0 {
		sc.s.o.cfg.Logger.Warn("mcp: a message too long to hold is not whole JSON; the calls it may answer stay open", "provider", sc.s.o.cfg.Provider, "bytes", sc.size)
		return false
	}
	note := "a result of " + strconv.FormatInt(sc.size, 10) + " bytes, too long for the proxy to hold: relayed unread but for its id, isError and effect id"
	var msgs []message
	for _, o := range lx.outlines {
		if o.method || !hasID(o.id) {
			continue
		}
		m := message{ID: o.id}
		switch {
		case o.hasError:
			m.Error = &rpcError{Code: o.errCode, Message: o.errMessage}
		case o.hasResult:
			r := map[string]any{"isError": o.isError, "oncetrace": note}
			if o.effectID != nil && len(sc.s.o.pointer) > 0 {
				r[sc.s.o.pointer[0]] = nest(o.effectID, sc.s.o.pointer[1:], o.effectArrays[1:])
			}
			m.Result = marshal(r)
		default:
			continue
		}
		msgs = append(msgs, m)
	}
	return sc.s.fromServer(msgs, d)
}

// nest puts v at the pointer tokens rest under an object (or, where the
// scan found an array, an array), so that the effect id is found where
// the pointer says in the result the attempt keeps.
func nest(v any, rest []string, arrays []bool) any {
	if len(rest) == 0 {
		return v
	}
	inner := nest(v, rest[1:], arrays[1:])
	if arrays[0] {
		i, _ := strconv.Atoi(rest[0])
		a := make([]any, i+1) // i is small: the lexer matches indices up to maxNestIndex
		a[i] = inner
		return a
	}
	return map[string]any{rest[0]: inner}
}

// maxNestIndex bounds an array index in the effect id pointer that a scan
// follows: the result the attempt keeps is rebuilt with that many nulls.
const maxNestIndex = 64

// outline is what a scan keeps of one JSON-RPC message.
type outline struct {
	id           json.RawMessage
	method       bool // a request or a notification, no answer
	hasError     bool
	hasResult    bool
	errCode      int
	errMessage   string
	isError      bool
	effectID     any    // a string or a json.Number, from the pointer
	effectArrays []bool // which levels of the pointer's path were arrays
}

// pathTok is one step of a path into a message: an object's key, or an
// array's index (key empty).
type pathTok struct {
	key   string
	index int // -1 for a key
}

type path []pathTok

// The targets of a scan, by index.
const (
	tID = iota
	tErrCode
	tErrMessage
	tIsError
	tEffectID // the pointer into the result
	numTargets
)

var (
	pathID         = path{{key: "id", index: -1}}
	pathErrCode    = path{{key: "error", index: -1}, {key: "code", index: -1}}
	pathErrMessage = path{{key: "error", index: -1}, {key: "message", index: -1}}
	pathIsError    = path{{key: "result", index: -1}, {key: "isError", index: -1}}
)

// tokens turns a JSON pointer's tokens into path steps, each a key or,
// when it reads as one, an index too: which it is depends on the JSON.
func tokens(ptr []string) path {
	out := make(path, len(ptr))
	for i, t := range ptr {
		out[i] = pathTok{key: t, index: -1}
		if n, err := strconv.Atoi(t); err == nil && n >= 0 && n <= maxNestIndex && strconv.Itoa(n) == t {
			out[i].index = n
		}
	}
	return out
}

type lexState uint8

const (
	stValue        lexState = iota // a value is expected
	stValueOrClose                 // after '[': a value or ']'
	stKeyOrClose                   // after '{': a key or '}'
	stKey                          // after ',' in an object: a key
	stColon                        // after a key: ':'
	stAfter                        // after a value: ',', a close, or, at the root, the end
	stString                       // inside a string
	stBare                         // inside a number or a literal
	stFailed                       // not JSON: nothing more is read
)

// frame is an open object or array.
type frame struct {
	array bool
	index int    // the current element's, in an array
	key   string // the current member's, in an object; "" past maxTracked or when too long
}

// jsonLexer reads JSON a few bytes at a time, keeping the scalars at its
// targets (paths from a message's root) and what a message's members are.
// The root is a message (an object) or a batch of them (an array).
type jsonLexer struct {
	targets  []path
	frames   []frame
	st       lexState
	inKey    bool
	esc      int    // in a string: 1 after '\', 2 to 5 within \uXXXX
	cur      []byte // the key or watched scalar read so far
	keep     bool   // cur is being kept
	long     bool   // cur outgrew maxScalarBytes
	target   int    // the target the current scalar is at, -1 for none
	msg      outline
	outlines []outline
}

func (lx *jsonLexer) write(p []byte) {
	for i := 0; i < len(p) && lx.st != stFailed; i++ {
		b := p[i]
		switch lx.st {
		case stString:
			if lx.esc == 0 {
				// Most of a long string is plain bytes: skip them at once.
				k := i
				for k < len(p) && p[k] != '"' && p[k] != '\\' {
					k++
				}
				lx.add(p[i:k])
				if k == len(p) {
					i = k
					continue
				}
				i, b = k, p[k]
				lx.add(p[i : i+1])
				if b == '"' {
					lx.endString()
				} else {
					lx.esc = 1
				}
				continue
			}
			lx.add(p[i : i+1])
			switch {
			case lx.esc == 1 && b == 'u':
				lx.esc = 2
			case lx.esc == 1 || lx.esc == 5:
				lx.esc = 0
			default:
				lx.esc++
			}
		case stBare:
			if isBare(b) {
				lx.add(p[i : i+1])
				continue
			}
			lx.endScalar()
			i-- // b comes after the value
		default:
			if b == ' ' || b == '\t' || b == '\n' || b == '\r' {
				continue
			}
			lx.structural(b)
		}
	}
}

func isBare(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b == '-' || b == '+' || b == '.' || b == 'E'
}

func (lx *jsonLexer) structural(b byte) {
	switch lx.st {
	case stValue, stValueOrClose:
		if b == ']' && lx.st == stValueOrClose {
			lx.close(true)
			return
		}
		lx.beginValue(b)
	case stKeyOrClose, stKey:
		if b == '}' && lx.st == stKeyOrClose {
			lx.close(false)
			return
		}
		if b != '"' {
			lx.st = stFailed
			return
		}
		lx.inKey = true
		lx.begin(len(lx.frames) <= lx.maxTracked(), -1)
		lx.add([]byte{b})
		lx.st = stString
	case stColon:
		if b != ':' {
			lx.st = stFailed
			return
		}
		lx.st = stValue
	case stAfter:
		if len(lx.frames) == 0 {
			lx.st = stFailed // something after the root value
			return
		}
		top := &lx.frames[len(lx.frames)-1]
		switch {
		case b == ',' && top.array:
			top.index++
			lx.st = stValue
		case b == ',':
			top.key = ""
			lx.st = stKey
		case b == ']' && top.array, b == '}' && !top.array:
			lx.close(top.array)
		default:
			lx.st = stFailed
		}
	}
}

func (lx *jsonLexer) beginValue(b byte) {
	switch {
	case b == '{' || b == '[':
		if len(lx.frames) >= maxScanDepth {
			lx.st = stFailed
			return
		}
		lx.frames = append(lx.frames, frame{array: b == '['})
		if b == '{' && lx.atMessage() {
			lx.msg = outline{}
		}
		lx.st = stKeyOrClose
		if b == '[' {
			lx.st = stValueOrClose
		}
	case b == '"' || b == '-' || b >= '0' && b <= '9' || b == 't' || b == 'f' || b == 'n':
		t := lx.watched()
		lx.inKey = false
		lx.begin(t >= 0, t)
		lx.add([]byte{b})
		lx.st = stString
		if b != '"' {
			lx.st = stBare
		}
	default:
		lx.st = stFailed
	}
}

// root is how many frames lie above a message: 1 in a batch.
func (lx *jsonLexer) root() int {
	if len(lx.frames) > 0 && lx.frames[0].array {
		return 1
	}
	return 0
}

// atMessage says the object just opened is a message.
func (lx *jsonLexer) atMessage() bool { return len(lx.frames) == lx.root()+1 }

func (lx *jsonLexer) maxTracked() int {
	n := 0
	for _, t := range lx.targets {
		n = max(n, len(t))
	}
	return n + 1 // and the batch
}

// watched is the target the value about to begin is at, or -1.
func (lx *jsonLexer) watched() int {
	r := lx.root()
	depth := len(lx.frames) - r
	if depth <= 0 {
		return -1
	}
	for i, t := range lx.targets {
		if len(t) != depth {
			continue
		}
		match := true
		for k, tok := range t {
			f := lx.frames[r+k]
			if f.array && f.index != tok.index || !f.array && f.key != tok.key {
				match = false
				break
			}
			if f.array && k == 0 {
				match = false // a message is an object
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

func (lx *jsonLexer) begin(keep bool, target int) {
	lx.cur, lx.keep, lx.long, lx.target, lx.esc = lx.cur[:0], keep, false, target, 0
}

func (lx *jsonLexer) add(b []byte) {
	if !lx.keep || lx.long {
		return
	}
	if len(lx.cur)+len(b) > maxScalarBytes {
		lx.long = true
		return
	}
	lx.cur = append(lx.cur, b...)
}

func (lx *jsonLexer) endString() {
	if lx.inKey {
		key := ""
		if lx.keep && !lx.long {
			json.Unmarshal(lx.cur, &key)
		}
		lx.frames[len(lx.frames)-1].key = key
		if len(lx.frames) == lx.root()+1 {
			switch key {
			case "method":
				lx.msg.method = true
			case "error":
				lx.msg.hasError = true
			case "result":
				lx.msg.hasResult = true
			}
		}
		lx.st = stColon
		return
	}
	lx.endScalar()
}

// endScalar keeps a watched scalar in the message's outline.
func (lx *jsonLexer) endScalar() {
	lx.st = stAfter
	if lx.target < 0 || lx.long {
		return
	}
	raw := lx.cur
	switch lx.target {
	case tID:
		if raw[0] == '"' || raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9' {
			lx.msg.id = append(json.RawMessage(nil), raw...)
		}
	case tErrCode:
		lx.msg.errCode, _ = strconv.Atoi(string(raw))
	case tErrMessage:
		json.Unmarshal(raw, &lx.msg.errMessage)
	case tIsError:
		lx.msg.isError = string(raw) == "true"
	case tEffectID:
		var id string
		switch {
		case raw[0] == '"' && json.Unmarshal(raw, &id) == nil && id != "":
			lx.msg.effectID = id
		case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
			lx.msg.effectID = json.Number(raw)
		default:
			return
		}
		// The levels of the pointer: the result, then each container
		// below it down to the one holding the id.
		base := lx.root() + 1
		lx.msg.effectArrays = make([]bool, len(lx.frames)-base)
		for k := range lx.msg.effectArrays {
			lx.msg.effectArrays[k] = lx.frames[base+k].array
		}
	}
}

func (lx *jsonLexer) close(array bool) {
	lx.frames = lx.frames[:len(lx.frames)-1]
	lx.st = stAfter
	if !array && len(lx.frames) == lx.root() && len(lx.outlines) < maxScanMessages {
		lx.outlines = append(lx.outlines, lx.msg)
	}
}
