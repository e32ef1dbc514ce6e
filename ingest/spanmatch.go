package ingest

import (
	"encoding/json"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/trace"
)

// Reading a span with a compiled span map (spanmap.go): its attributes are
// walked once, keeping those the map names by their slot; every rule and
// field then reads slots, not the span's attribute list, so that the cost
// of a span grows with its attributes, not with the number of dialects.
// Only a span that no other entry gave a role is walked again, by the
// fallback entry's patterns.

// spanView is one span as the span map reads it.
type spanView struct {
	span  ptrace.Span
	scope string // the instrumentation scope's name
	found []foundAttr
	// namespace is the one a namespace_type condition of the rule that
	// recognised the span found ("foo" of foo.span.type = tool).
	namespace string
}

// foundAttr is an attribute of the span that the map names.
type foundAttr struct {
	slot int32
	v    pcommon.Value
}

// view reads sp's attributes once. The attributes found are appended to
// arena, which the spans of one request share.
func (m *SpanMap) view(sp ptrace.Span, scope string, arena []foundAttr) (spanView, []foundAttr) {
	attrs := sp.Attributes()
	start := len(arena)
	for k, v := range attrs.All() {
		if len(k) >= len(m.slotsByLength) {
			continue
		}
		for _, named := range m.slotsByLength[len(k)] {
			// The last byte first: names of one length mostly differ
			// there (.name, .role, .id), and it spares comparing them whole.
			if named.name[len(k)-1] == k[len(k)-1] && named.name == k {
				arena = append(arena, foundAttr{slot: named.slot, v: v})
				break
			}
		}
	}
	return spanView{span: sp, scope: scope, found: arena[start:len(arena):len(arena)]}, arena
}

// get is the attribute in slot, the first one when a key was sent twice
// (as pcommon.Map.Get).
func (v *spanView) get(slot int32) (pcommon.Value, bool) {
	for i := range v.found {
		if v.found[i].slot == slot {
			return v.found[i].v, true
		}
	}
	return pcommon.Value{}, false
}

// roleOf decides a span's role, and for a tool call the rule that
// recognised it. oncetrace's markers win even at the root. The trace's
// root span is its execution, whatever its dialect says, unless all it is
// is an HTTP call: the HTTP instrumentation starts a trace of its own for
// a request made outside any span (LangGraph's and Mastra's exporters
// leave their fetches so), and such a span is an HTTP call that lost its
// parent, not a run.
func (m *SpanMap) roleOf(v *spanView, parentless bool) (spanRole, *spanRule) {
	if v.span.Name() == otlpEffectName {
		return roleEffect, nil
	}
	for _, r := range m.evenAtRoot {
		if v.matches(r) {
			return roleTool, r
		}
	}
	// A span an execution rule matches is its execution's root wherever
	// it is (Temporal's RunWorkflow below the client's StartWorkflow); a
	// context rule that holds even at the root keeps a client's span that
	// starts the trace from being taken for the run (StartWorkflow).
	for _, r := range m.execution {
		if v.matches(r) {
			v.namespace = ""
			return roleRoot, nil
		}
	}
	if parentless && v.matchesAny(m.contextAtRoot) {
		return roleContext, nil
	}
	if !parentless {
		return m.ruledRole(v)
	}
	if v.matchesAny(m.http) { // rarely: most roots are no HTTP call
		if role, _ := m.ruledRole(v); role == roleHTTP && !m.namesExecution(v) &&
			!v.matchesAny(m.fallbackTool) && !v.matchesAny(m.fallbackModel) {
			return roleHTTP, nil
		}
	}
	v.namespace = ""
	return roleRoot, nil
}

// ruledRole is the role of the first rule that matches: a rule that says
// the span is context (whatever later rules would say), then tool calls
// before model calls before HTTP calls, each across every entry in order,
// then the fallback entries'.
func (m *SpanMap) ruledRole(v *spanView) (spanRole, *spanRule) {
	for _, r := range m.context {
		if v.matches(r) {
			return roleContext, r
		}
	}
	for _, r := range m.tool {
		if v.matches(r) {
			return roleTool, r
		}
	}
	for _, r := range m.model {
		if v.matches(r) {
			return roleModel, r
		}
	}
	for _, r := range m.http {
		if v.matches(r) {
			return roleHTTP, r
		}
	}
	for _, r := range m.fallbackTool {
		if v.matches(r) {
			return roleTool, r
		}
	}
	for _, r := range m.fallbackModel {
		if v.matches(r) {
			return roleModel, r
		}
	}
	return roleContext, nil
}

// namesExecution reports whether the span's attributes name an execution
// (an agent's name, a function id...), which makes it more than an HTTP
// call.
func (m *SpanMap) namesExecution(v *spanView) bool {
	name, _ := m.executionName(v)
	return name != ""
}

func (v *spanView) matchesAny(rules []*spanRule) bool {
	for _, r := range rules {
		if v.matches(r) {
			return true
		}
	}
	return false
}

// matches reports whether all of r's conditions hold. A namespace found by
// a rule that then fails is forgotten.
func (v *spanView) matches(r *spanRule) bool {
	namespace := v.namespace
	for _, c := range r.when {
		if !v.holds(c) {
			v.namespace = namespace
			return false
		}
	}
	return true
}

func (v *spanView) allHold(cs []*condition) bool {
	for _, c := range cs {
		if !v.holds(c) {
			return false
		}
	}
	return true
}

func (v *spanView) holds(c *condition) bool {
	switch c.test {
	case testAttrEquals, testAttrIn, testAttrNonempty, testAttrMatches:
		val, ok := v.get(c.slot)
		if !ok {
			return false
		}
		s := valueString(val)
		switch c.test {
		case testAttrEquals:
			return equal(s, c.value, c.fold)
		case testAttrIn:
			for _, want := range c.values {
				if equal(s, want, c.fold) {
					return true
				}
			}
			return false
		case testAttrNonempty:
			return s != ""
		}
		return c.re.MatchString(s)
	case testAttrPresent:
		_, ok := v.get(c.slot)
		return ok
	case testAttrAbsent:
		_, ok := v.get(c.slot)
		return !ok
	case testSpanName:
		return equal(v.span.Name(), c.value, c.fold)
	case testSpanNamePrefix:
		return strings.HasPrefix(v.span.Name(), c.value)
	case testSpanNameMatches:
		return c.re.MatchString(v.span.Name())
	case testKind:
		return v.span.Kind() == c.kind
	case testScope:
		return v.scope == c.value
	case testAny:
		for _, sub := range c.sub {
			if v.holds(sub) {
				return true
			}
		}
		return false
	case testNot:
		return !v.holds(c.sub[0])
	case testNamespaceType:
		return v.findNamespace(c)
	case testKeyEnds, testKeyContains:
		_, ok := v.keyed(c.test == testKeyEnds, c.keys, c.lacks, true)
		return ok
	}
	return false
}

func equal(got, want string, fold bool) bool {
	if fold {
		return strings.EqualFold(got, want)
	}
	return got == want
}

// findNamespace looks for an attribute <namespace>.<type key> that says
// c.value (in any case) beside an attribute <namespace>.<one of withAny>,
// and keeps the first such namespace, in the span's attribute order.
func (v *spanView) findNamespace(c *condition) bool {
	for k, val := range v.span.Attributes().All() {
		// A type is a string: other values are not printed to be compared.
		if val.Type() != pcommon.ValueTypeStr || !strings.EqualFold(val.Str(), c.value) {
			continue
		}
		for _, typeKey := range c.typeKeys {
			namespace, ok := strings.CutSuffix(k, "."+typeKey)
			if !ok || namespace == "" {
				continue
			}
			for _, name := range c.withAny {
				if _, ok := v.span.Attributes().Get(namespace + "." + name); ok {
					v.namespace = namespace
					return true
				}
			}
		}
	}
	return false
}

// keyed is the first attribute whose key (in any case) ends with, or
// contains, one of keys and contains none of lacks; with nonempty, the
// first such with a value.
func (v *spanView) keyed(ends bool, keys, lacks []string, nonempty bool) (pcommon.Value, bool) {
	for k, val := range v.span.Attributes().All() {
		if !keyMatches(k, ends, keys, lacks) {
			continue
		}
		if nonempty && isEmptyValue(val) {
			continue
		}
		return val, true
	}
	return pcommon.Value{}, false
}

// isEmptyValue: a value valueString gives as "", without printing a map or
// an array to find out.
func isEmptyValue(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str() == ""
	case pcommon.ValueTypeSlice:
		return v.Slice().Len() == 0 || isEmptyValue(v.Slice().At(0))
	case pcommon.ValueTypeEmpty:
		return true
	case pcommon.ValueTypeBytes:
		return v.Bytes().Len() == 0
	}
	return false
}

func keyMatches(key string, ends bool, keys, lacks []string) bool {
	for _, l := range lacks {
		if containsFold(key, l) {
			return false
		}
	}
	for _, want := range keys {
		// want is lower case: its last byte is compared first, cheaply.
		if ends && len(key) >= len(want) && key[len(key)-1]|0x20 == want[len(want)-1]|0x20 &&
			strings.EqualFold(key[len(key)-len(want):], want) {
			return true
		}
		if !ends && containsFold(key, want) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains sub, lower case, in any case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// value is what source s reads of the span, and whether it is there.
func (v *spanView) value(s *fieldSource, nonempty bool) (pcommon.Value, bool) {
	if len(s.when) > 0 && !v.allHold(s.when) {
		return pcommon.Value{}, false
	}
	switch s.kind {
	case sourceAttr:
		val, ok := v.get(s.slot)
		if ok && s.jsonPath != nil {
			return valueAtJSONPath(val, s.jsonPath)
		}
		return val, ok
	case sourceInNamespace:
		if v.namespace == "" {
			return pcommon.Value{}, false
		}
		return v.span.Attributes().Get(v.namespace + "." + s.attr)
	case sourceKeyEnds, sourceKeyContains:
		return v.keyed(s.kind == sourceKeyEnds, s.keys, s.lacks, nonempty)
	}
	return pcommon.Value{}, false
}

// text is s read as a string, "" when it is not there.
func (v *spanView) text(s *fieldSource) string {
	switch s.kind {
	case sourceSpanName, sourceSpanNameAfter:
		if len(s.when) > 0 && !v.allHold(s.when) {
			return ""
		}
		if s.kind == sourceSpanName {
			return v.span.Name()
		}
		rest, ok := strings.CutPrefix(v.span.Name(), s.attr)
		if !ok {
			return ""
		}
		return rest
	}
	if s.kind == sourceJoin {
		parts := make([]string, len(s.joinSlots))
		for i, slot := range s.joinSlots {
			val, ok := v.get(slot)
			if parts[i] = ""; ok {
				parts[i] = valueString(val)
			}
			if parts[i] == "" {
				return ""
			}
		}
		return strings.Join(parts, s.joinWith)
	}
	val, ok := v.value(s, true)
	if !ok {
		return ""
	}
	return valueString(val)
}

// text is field f of the span: the first source with a value.
func (m *SpanMap) text(v *spanView, f spanField) string {
	for _, s := range m.fields[f] {
		if x := v.text(s); x != "" {
			return x
		}
	}
	return ""
}

// integer is field f of the span: the first source that is there, as an
// integer (0 when it is not one).
func (m *SpanMap) integer(v *spanView, f spanField) int64 {
	for _, s := range m.fields[f] {
		if val, ok := v.value(s, false); ok {
			return valueInt(val)
		}
	}
	return 0
}

// jsonField is field f of the span (args, result): the first source that
// is there, as JSON, and whether that source unwraps OpenLLMetry's
// arguments.
func (m *SpanMap) jsonField(v *spanView, f spanField) (value any, ok, unwrap bool) {
	for _, s := range m.fields[f] {
		if val, there := v.value(s, false); there {
			return jsonValue(val), true, s.unwrap
		}
	}
	return nil, false, false
}

// executionName is the best-ranked name the span's attributes give its
// execution and where it came from (trace.NameSources); "" when none.
func (m *SpanMap) executionName(v *spanView) (name, source string) {
	best := len(trace.NameSources)
	for _, s := range m.fields[fieldExecutionName] {
		if s.rank >= best {
			continue
		}
		if x := v.text(s); x != "" {
			name, source, best = x, s.rankName, s.rank
		}
	}
	return name, source
}

// textIn is field f read off attributes that are not a span's (a resource,
// a span event): its plain attribute sources only.
func (m *SpanMap) textIn(attrs pcommon.Map, f spanField) string {
	for _, s := range m.fields[f] {
		if s.kind == sourceJoin {
			if x := joinedIn(attrs, s); x != "" {
				return x
			}
			continue
		}
		if s.kind != sourceAttr || len(s.when) > 0 {
			continue
		}
		if x := str(attrs, s.attr); x != "" {
			return x
		}
	}
	return ""
}

// joinedIn is a joined source read off attributes, "" unless each of its
// attributes has a value.
func joinedIn(attrs pcommon.Map, s *fieldSource) string {
	parts := make([]string, len(s.joinAttrs))
	for i, a := range s.joinAttrs {
		if parts[i] = str(attrs, a); parts[i] == "" {
			return ""
		}
	}
	return strings.Join(parts, s.joinWith)
}

// unwrapOpenLLMetryArgs: OpenLLMetry wraps a Python call's arguments as
// {"args": [...], "kwargs": {...}}; the keyword arguments (or the one
// positional argument) are what the tool was called with.
func unwrapOpenLLMetryArgs(v any) any {
	raw, isRaw := v.(json.RawMessage)
	if !isRaw {
		return v
	}
	var wrapped struct {
		Args   []json.RawMessage          `json:"args"`
		Kwargs map[string]json.RawMessage `json:"kwargs"` // raw: numbers as sent
	}
	if json.Unmarshal(raw, &wrapped) != nil {
		return v
	}
	switch {
	case len(wrapped.Args) == 0 && wrapped.Kwargs != nil:
		return wrapped.Kwargs
	case len(wrapped.Args) == 1 && len(wrapped.Kwargs) == 0:
		return wrapped.Args[0]
	}
	return v
}

// valueAtJSONPath is the value at path in an attribute that holds a JSON
// object (Mastra keeps a model call's usage in the provider's answer), as
// an attribute value: a string, a number, a boolean, or an object or
// array as its JSON.
func valueAtJSONPath(v pcommon.Value, path []string) (pcommon.Value, bool) {
	if v.Type() != pcommon.ValueTypeStr {
		return pcommon.Value{}, false
	}
	raw, ok := jsonLookup(v.Str(), path)
	if !ok || raw == "" {
		return pcommon.Value{}, false
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal([]byte(raw), &s) != nil {
			return pcommon.Value{}, false
		}
		return pcommon.NewValueStr(s), true
	case c == 't' || c == 'f':
		return pcommon.NewValueBool(raw == "true"), raw == "true" || raw == "false"
	case c == 'n':
		return pcommon.Value{}, false // null: not there
	case c == '{' || c == '[':
		return pcommon.NewValueStr(raw), true
	}
	if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return pcommon.NewValueInt(n), true
	}
	if f, err := strconv.ParseFloat(raw, 64); err == nil {
		return pcommon.NewValueDouble(f), true
	}
	return pcommon.Value{}, false
}

// jsonLookup is the JSON text of the value at path in the JSON object s,
// found by skipping over every other member rather than decoding them: the
// provider's answer Mastra keeps is kilobytes, and a model call needs two
// numbers of it.
func jsonLookup(s string, path []string) (string, bool) {
	for _, key := range path {
		i := skipJSONSpace(s, 0)
		if i >= len(s) || s[i] != '{' {
			return "", false
		}
		i++
		for {
			i = skipJSONSpace(s, i)
			if i >= len(s) || s[i] != '"' {
				return "", false // the end of the object, or not JSON
			}
			keyEnd, ok := skipJSONValue(s, i)
			if !ok {
				return "", false
			}
			name := s[i:keyEnd]
			i = skipJSONSpace(s, keyEnd)
			if i >= len(s) || s[i] != ':' {
				return "", false
			}
			i = skipJSONSpace(s, i+1)
			end, ok := skipJSONValue(s, i)
			if !ok {
				return "", false
			}
			if jsonKeyIs(name, key) {
				s = s[i:end]
				break
			}
			i = skipJSONSpace(s, end)
			if i >= len(s) || s[i] != ',' {
				return "", false
			}
			i++
		}
	}
	return s, true
}

func skipJSONSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// skipJSONValue is the end of the JSON value that starts at s[i].
func skipJSONValue(s string, i int) (int, bool) {
	if i >= len(s) {
		return 0, false
	}
	switch s[i] {
	case '"', '{', '[':
	default: // a number or a literal: up to what follows it
		end := i
		for end < len(s) && !strings.ContainsRune(",}] \t\n\r:", rune(s[end])) {
			end++
		}
		return end, end > i
	}
	depth := 0
	for ; i < len(s); i++ {
		switch s[i] {
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if i >= len(s) {
				return 0, false
			}
			if depth == 0 {
				return i + 1, true
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// jsonKeyIs reports whether the quoted JSON string name is key.
func jsonKeyIs(name, key string) bool {
	if !strings.Contains(name, `\`) {
		return name[1:len(name)-1] == key
	}
	var unquoted string
	return json.Unmarshal([]byte(name), &unquoted) == nil && unquoted == key
}
