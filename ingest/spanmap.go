package ingest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/trace"
)

// Which span is a tool call, a model call or an HTTP call, and where its
// tool name, arguments, model or tokens are, is data: a span map, a list
// of dialect entries (spandialects.json, the format in docs/otlp.md § "The
// span map"). Frameworks change their attributes more often than oncetrace
// is released, so a user adds or replaces entries with serve --span-map
// instead of waiting for a Go branch. The map is compiled once: every
// attribute it names gets a slot, so that reading a span is one pass over
// its attributes, whatever the number of dialects (spanmatch.go).

//go:embed spandialects.json
var builtinSpanMapJSON []byte

// protocolDialect is the entry of oncetrace's own attributes: always
// first, and never replaced, so that oncetrace.* attributes win.
const protocolDialect = "oncetrace"

// SpanDialects are the entries of one span map file, parsed and checked.
type SpanDialects struct {
	entries []*dialect
}

// Names are the entries' names, in the file's order.
func (d SpanDialects) Names() []string {
	names := make([]string, len(d.entries))
	for i, e := range d.entries {
		names[i] = e.name
	}
	return names
}

// SpanMap is a compiled span map: what MapOTLP reads spans with.
type SpanMap struct {
	dialects []*dialect
	// slots numbers the attributes the map names. slotsByLength holds
	// them by the length of their name: a span's attributes are looked up
	// there once each, comparing a name with the two or three of its
	// length rather than hashing it.
	slots         map[string]int32
	slotsByLength [][]namedSlot
	// Rules by the order they are tried in: the ones that win even at the
	// root, then the rules that make a span context, then tool, model and
	// HTTP rules of every entry, then the fallback entries' tool and model
	// rules.
	evenAtRoot                  []*spanRule
	execution                   []*spanRule
	contextAtRoot               []*spanRule
	context                     []*spanRule
	tool, model, http           []*spanRule
	fallbackTool, fallbackModel []*spanRule
	fields                      [fieldCount][]*fieldSource
}

// Dialects are the map's entries' names, in the order they are tried.
func (m *SpanMap) Dialects() []string {
	names := make([]string, len(m.dialects))
	for i, d := range m.dialects {
		names[i] = d.name
	}
	return names
}

var builtinSpanMap = sync.OnceValue(func() *SpanMap {
	d, err := parseSpanDialects(builtinSpanMapJSON, true)
	if err != nil {
		panic("ingest: the built-in span map (spandialects.json): " + err.Error())
	}
	return compileSpanMap(d.entries)
})

// BuiltinSpanMap is the span map of the built-in dialects.
func BuiltinSpanMap() *SpanMap { return builtinSpanMap() }

// NewSpanMap is the built-in span map with extra entries (a --span-map
// file each, in order) tried before the built-in ones, after oncetrace's
// own. An entry named like an earlier one, built-in or from an earlier
// file, replaces it.
func NewSpanMap(extra ...SpanDialects) *SpanMap {
	builtin := builtinSpanMap().dialects
	entries := []*dialect{builtin[0]} // oncetrace's own
	for _, d := range extra {
		for _, e := range d.entries {
			if i := slices.IndexFunc(entries, func(x *dialect) bool { return x.name == e.name }); i >= 0 {
				entries[i] = e
				continue
			}
			entries = append(entries, e)
		}
	}
	for _, e := range builtin[1:] {
		if !slices.ContainsFunc(entries, func(x *dialect) bool { return x.name == e.name }) {
			entries = append(entries, e)
		}
	}
	return compileSpanMap(entries)
}

// namedSlot is an attribute the map names, and its slot.
type namedSlot struct {
	name string
	slot int32
}

// dialect is one checked entry.
type dialect struct {
	name          string
	fallback      bool
	marksAttempts bool
	tool, model   []*spanRule
	http, context []*spanRule
	// execution rules: a span one matches is its execution's root
	// wherever it is in the trace (Temporal's RunWorkflow, below the
	// client's StartWorkflow).
	execution []*spanRule
	fields    [fieldCount][]*fieldSource
}

// spanRule is one way an entry recognises a role: all its conditions hold.
type spanRule struct {
	dialect    *dialect
	when       []*condition
	evenAtRoot bool
	// unreported is what a tool call of this rule that ended without an
	// error status means, when the framework does not say (ADK's bare span).
	unreported *unreportedOutcome
}

type unreportedOutcome struct{ outcome, error string }

// condTest is what a condition checks.
type condTest int

const (
	testAttrEquals condTest = iota
	testAttrIn
	testAttrPresent
	testAttrAbsent
	testAttrNonempty
	testAttrMatches
	testSpanName
	testSpanNamePrefix
	testSpanNameMatches
	testKind
	testScope
	testAny
	testNot
	testNamespaceType
	testKeyEnds
	testKeyContains
)

type condition struct {
	test   condTest
	attr   string
	slot   int32
	value  string
	values []string
	fold   bool
	re     *regexp.Regexp
	kind   ptrace.SpanKind
	sub    []*condition // any; not has one
	// namespace_type: a key typeKey under a namespace holds value, and
	// the namespace holds one of withAny.
	typeKeys, withAny []string
	// key_ends, key_contains (lower case), key_lacks.
	keys, lacks []string
}

// spanField is a field a span map says where to find.
type spanField int

const (
	fieldExecutionID spanField = iota
	fieldSession
	fieldExecutionName
	fieldStepID
	fieldIdempotencyKey
	fieldTool
	fieldCallID
	fieldArgs
	fieldResult
	fieldModel
	fieldInputTokens
	fieldOutputTokens
	fieldHTTPMethod
	fieldHTTPURL
	fieldHTTPStatus
	fieldHTTPIdempotencyKey
	fieldErrorType
	fieldErrorMessage
	fieldCount
)

// fieldKind is how a field's value is read.
type fieldKind int

const (
	kindString fieldKind = iota // the first source with a non-empty value
	kindInt                     // the first source that is there, as an integer
	kindJSON                    // the first source that is there, as JSON
)

type fieldSpec struct {
	key  string
	kind fieldKind
	// attrsOnly: read off resources and span events too, so plain
	// attributes only.
	attrsOnly bool
}

var spanFields = [fieldCount]fieldSpec{
	fieldExecutionID:        {"execution_id", kindString, true},
	fieldSession:            {"session", kindString, true},
	fieldExecutionName:      {"execution_name", kindString, false},
	fieldStepID:             {"step_id", kindString, false},
	fieldIdempotencyKey:     {"idempotency_key", kindString, true},
	fieldTool:               {"tool", kindString, false},
	fieldCallID:             {"call_id", kindString, false},
	fieldArgs:               {"args", kindJSON, false},
	fieldResult:             {"result", kindJSON, false},
	fieldModel:              {"model", kindString, false},
	fieldInputTokens:        {"input_tokens", kindInt, false},
	fieldOutputTokens:       {"output_tokens", kindInt, false},
	fieldHTTPMethod:         {"http_method", kindString, false},
	fieldHTTPURL:            {"http_url", kindString, false},
	fieldHTTPStatus:         {"http_status", kindInt, false},
	fieldHTTPIdempotencyKey: {"http_idempotency_key", kindString, false},
	fieldErrorType:          {"error_type", kindString, false},
	fieldErrorMessage:       {"error_message", kindString, false},
}

// sourceKind is where a field source reads.
type sourceKind int

const (
	sourceAttr          sourceKind = iota // an attribute
	sourceSpanName                        // the span's name
	sourceSpanNameAfter                   // the span's name after a prefix
	sourceInNamespace                     // an attribute of the namespace a rule found
	sourceKeyEnds                         // the first attribute whose key ends so
	sourceKeyContains                     // the first attribute whose key contains so
	sourceJoin                            // several attributes, all there, joined
)

type fieldSource struct {
	kind      sourceKind
	attr      string // attribute, prefix, or suffix within the namespace
	slot      int32
	keys      []string
	lacks     []string
	when      []*condition
	unwrap    bool     // unwrap_openllmetry_args
	jsonPath  []string // json_key: the value at this path in the attribute's JSON
	rank      int      // execution_name: the place of ranks_as in trace.NameSources
	rankName  string
	fromEntry *dialect
	// join: the attributes of a joined source, their slots, and what goes
	// between their values.
	joinAttrs []string
	joinSlots []int32
	joinWith  string
}

// The JSON of a span map file. Conditions and field sources are decoded
// one by one, so that an error names where it is.
type spanMapJSON struct {
	Dialects []json.RawMessage `json:"dialects"`
}

type dialectJSON struct {
	Name          string                       `json:"name"`
	About         string                       `json:"about"`
	Fallback      bool                         `json:"fallback"`
	MarksAttempts bool                         `json:"marks_attempts"`
	Tool          []json.RawMessage            `json:"tool"`
	Model         []json.RawMessage            `json:"model"`
	HTTP          []json.RawMessage            `json:"http"`
	Context       []json.RawMessage            `json:"context"`
	Execution     []json.RawMessage            `json:"execution"`
	Fields        map[string][]json.RawMessage `json:"fields"`
}

type ruleJSON struct {
	When               []json.RawMessage `json:"when"`
	EvenAtRoot         bool              `json:"even_at_root"`
	WithoutErrorStatus *struct {
		Outcome string `json:"outcome"`
		Error   string `json:"error"`
	} `json:"without_error_status"`
}

type conditionJSON struct {
	Attr            *string            `json:"attr"`
	Equals          *string            `json:"equals"`
	In              *[]string          `json:"in"`
	Present         *bool              `json:"present"`
	Nonempty        *bool              `json:"nonempty"`
	Matches         *string            `json:"matches"`
	IgnoreCase      bool               `json:"ignore_case"`
	SpanName        *string            `json:"span_name"`
	SpanNamePrefix  *string            `json:"span_name_prefix"`
	SpanNameMatches *string            `json:"span_name_matches"`
	Kind            *string            `json:"kind"`
	Scope           *string            `json:"scope"`
	Any             *[]json.RawMessage `json:"any"`
	Not             json.RawMessage    `json:"not"`
	NamespaceType   *string            `json:"namespace_type"`
	TypeKeys        []string           `json:"type_keys"`
	WithAny         []string           `json:"with_any"`
	KeyEnds         *[]string          `json:"key_ends"`
	KeyContains     *[]string          `json:"key_contains"`
	KeyLacks        []string           `json:"key_lacks"`
}

type sourceJSON struct {
	Attr          *string           `json:"attr"`
	Attrs         *[]string         `json:"attrs"`
	Join          *string           `json:"join"`
	SpanName      *bool             `json:"span_name"`
	SpanNameAfter *string           `json:"span_name_after"`
	InNamespace   *string           `json:"in_namespace"`
	KeyEnds       *[]string         `json:"key_ends"`
	KeyContains   *[]string         `json:"key_contains"`
	KeyLacks      []string          `json:"key_lacks"`
	Transform     *string           `json:"transform"`
	JSONKey       *string           `json:"json_key"`
	RanksAs       *string           `json:"ranks_as"`
	When          []json.RawMessage `json:"when"`
}

// dialectName: what an entry's name may be; it is also an attempt's
// recognised_by, an id.
var dialectName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

var spanKinds = map[string]ptrace.SpanKind{
	"unspecified": ptrace.SpanKindUnspecified, "internal": ptrace.SpanKindInternal, "server": ptrace.SpanKindServer,
	"client": ptrace.SpanKindClient, "producer": ptrace.SpanKindProducer, "consumer": ptrace.SpanKindConsumer,
}

// ParseSpanDialects reads a span map file (docs/otlp.md § "The span map")
// and checks every entry. An error names the entry and the key.
func ParseSpanDialects(data []byte) (SpanDialects, error) { return parseSpanDialects(data, false) }

// parseSpanDialects reads a span map; only the built-in one may hold the
// entry of oncetrace's own attributes.
func parseSpanDialects(data []byte, builtin bool) (SpanDialects, error) {
	var file spanMapJSON
	if err := strictJSON(data, &file); err != nil {
		return SpanDialects{}, fmt.Errorf("span map: %w", err)
	}
	if file.Dialects == nil {
		return SpanDialects{}, errors.New(`span map: want an object with a "dialects" list`)
	}
	var out SpanDialects
	seen := map[string]bool{}
	for i, raw := range file.Dialects {
		d, err := parseDialect(raw, builtin)
		where := fmt.Sprintf("dialects[%d]", i)
		if d != nil {
			where = fmt.Sprintf("entry %q (dialects[%d])", d.name, i)
		}
		switch {
		case err != nil:
			return SpanDialects{}, fmt.Errorf("span map: %s: %w", where, err)
		case seen[d.name]:
			return SpanDialects{}, fmt.Errorf("span map: %s: the name is given twice in this file", where)
		}
		seen[d.name] = true
		out.entries = append(out.entries, d)
	}
	return out, nil
}

// parseDialect checks one entry. It returns the entry with its name as
// soon as the name is known, so that an error can name it.
func parseDialect(raw json.RawMessage, builtin bool) (*dialect, error) {
	var j dialectJSON
	if err := strictJSON(raw, &j); err != nil {
		// Name the entry when its name, at least, reads.
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &named) == nil && dialectName.MatchString(named.Name) {
			return &dialect{name: named.Name}, err
		}
		return nil, err
	}
	if !dialectName.MatchString(j.Name) {
		return nil, fmt.Errorf(`name %q: want 1 to 64 of a-z, 0-9, ".", "_", "-", starting with a letter or a digit`, j.Name)
	}
	d := &dialect{name: j.Name, fallback: j.Fallback, marksAttempts: j.MarksAttempts}
	if d.name == protocolDialect && !builtin {
		return d, fmt.Errorf("name: %q is oncetrace's own attributes, which always win; give your entry another name", protocolDialect)
	}
	var err error
	if d.tool, err = parseRules(d, "tool", j.Tool, true); err != nil {
		return d, err
	}
	if d.model, err = parseRules(d, "model", j.Model, false); err != nil {
		return d, err
	}
	if d.http, err = parseRules(d, "http", j.HTTP, false); err != nil {
		return d, err
	}
	if d.context, err = parseRules(d, "context", j.Context, false); err != nil {
		return d, err
	}
	if d.execution, err = parseRules(d, "execution", j.Execution, false); err != nil {
		return d, err
	}
	if d.fallback && len(d.context) > 0 {
		return d, errors.New("context: a fallback entry's rules are tried after every other's; it has nothing to veto")
	}
	if d.fallback && len(d.execution) > 0 {
		return d, errors.New("execution: a fallback entry's rules are tried after every other's; it names no root")
	}
	for _, key := range slices.Sorted(maps.Keys(j.Fields)) {
		f := slices.IndexFunc(spanFields[:], func(sf fieldSpec) bool { return sf.key == key })
		if f < 0 {
			return d, fmt.Errorf("fields.%s: not a field; the fields are %s", key, fieldKeys())
		}
		for i, rawSource := range j.Fields[key] {
			s, err := parseSource(d, spanField(f), rawSource)
			if err != nil {
				return d, fmt.Errorf("fields.%s[%d]: %w", key, i, err)
			}
			d.fields[f] = append(d.fields[f], s)
		}
	}
	return d, nil
}

func fieldKeys() string {
	keys := make([]string, len(spanFields))
	for i, f := range spanFields {
		keys[i] = f.key
	}
	return strings.Join(keys, ", ")
}

func parseRules(d *dialect, role string, raws []json.RawMessage, isTool bool) ([]*spanRule, error) {
	var rules []*spanRule
	for i, raw := range raws {
		where := fmt.Sprintf("%s[%d]", role, i)
		var j ruleJSON
		if err := strictJSON(raw, &j); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if len(j.When) == 0 {
			return nil, fmt.Errorf(`%s.when: want at least one condition`, where)
		}
		r := &spanRule{dialect: d, evenAtRoot: j.EvenAtRoot}
		if j.EvenAtRoot && !isTool && role != "context" {
			return nil, fmt.Errorf("%s.even_at_root: only a tool or context rule can win at the root", where)
		}
		if j.EvenAtRoot && d.fallback {
			return nil, fmt.Errorf("%s.even_at_root: a fallback entry's rules are tried last", where)
		}
		if w := j.WithoutErrorStatus; w != nil {
			switch {
			case !isTool:
				return nil, fmt.Errorf("%s.without_error_status: only a tool rule has an outcome", where)
			case !slices.Contains([]string{"ok", "error", "timeout"}, w.Outcome):
				return nil, fmt.Errorf("%s.without_error_status.outcome: want ok, error or timeout, not %q", where, w.Outcome)
			case len(w.Error) > DefaultLimits.TextBytes:
				return nil, fmt.Errorf("%s.without_error_status.error: %d bytes, limit %d", where, len(w.Error), DefaultLimits.TextBytes)
			}
			r.unreported = &unreportedOutcome{outcome: w.Outcome, error: w.Error}
		}
		for k, rawCond := range j.When {
			c, err := parseCondition(rawCond, true)
			if err != nil {
				return nil, fmt.Errorf("%s.when[%d]: %w", where, k, err)
			}
			r.when = append(r.when, c)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// parseCondition checks one condition: one subject (attr, span_name, kind,
// ...) and, for an attribute, one test. bindsOK: a namespace_type may be
// used here (not under a "not", where it would bind nothing).
func parseCondition(raw json.RawMessage, bindsOK bool) (*condition, error) {
	var j conditionJSON
	if err := strictJSON(raw, &j); err != nil {
		return nil, err
	}
	var subjects []string
	for key, set := range map[string]bool{"attr": j.Attr != nil, "span_name": j.SpanName != nil, "span_name_prefix": j.SpanNamePrefix != nil,
		"span_name_matches": j.SpanNameMatches != nil, "kind": j.Kind != nil, "scope": j.Scope != nil, "any": j.Any != nil,
		"not": j.Not != nil, "namespace_type": j.NamespaceType != nil, "key_ends": j.KeyEnds != nil, "key_contains": j.KeyContains != nil} {
		if set {
			subjects = append(subjects, key)
		}
	}
	slices.Sort(subjects)
	if len(subjects) != 1 {
		return nil, fmt.Errorf(`want exactly one of "attr", "span_name", "span_name_prefix", "span_name_matches", "kind", "scope", "any", "not", `+
			`"namespace_type", "key_ends", "key_contains"; got %s`, orNone(subjects))
	}
	var tests []string
	for key, set := range map[string]bool{"equals": j.Equals != nil, "in": j.In != nil, "present": j.Present != nil,
		"nonempty": j.Nonempty != nil, "matches": j.Matches != nil} {
		if set {
			tests = append(tests, key)
		}
	}
	slices.Sort(tests)
	subject := subjects[0]
	if subject != "attr" && len(tests) > 0 {
		return nil, fmt.Errorf("%q: only an attribute is tested with %s", tests[0], strings.Join(tests, ", "))
	}
	if j.IgnoreCase && !(subject == "attr" && (j.Equals != nil || j.In != nil)) && subject != "span_name" {
		return nil, errors.New(`"ignore_case": only with "equals", "in" or "span_name"`)
	}
	if (j.TypeKeys != nil || j.WithAny != nil) && subject != "namespace_type" {
		return nil, errors.New(`"type_keys" and "with_any": only with "namespace_type"`)
	}
	if j.KeyLacks != nil && subject != "key_contains" {
		return nil, errors.New(`"key_lacks": only with "key_contains"`)
	}
	c := &condition{fold: j.IgnoreCase, slot: -1}
	switch subject {
	case "attr":
		c.attr = *j.Attr
		if c.attr == "" {
			return nil, errors.New(`"attr": want an attribute name`)
		}
		if len(tests) != 1 {
			return nil, fmt.Errorf(`attribute %q: want exactly one of "equals", "in", "present", "nonempty", "matches"; got %s`, c.attr, orNone(tests))
		}
		switch {
		case j.Equals != nil:
			c.test, c.value = testAttrEquals, *j.Equals
		case j.In != nil:
			if len(*j.In) == 0 {
				return nil, fmt.Errorf(`attribute %q: "in": want at least one value`, c.attr)
			}
			c.test, c.values = testAttrIn, *j.In
		case j.Present != nil:
			c.test = testAttrPresent
			if !*j.Present {
				c.test = testAttrAbsent
			}
		case j.Nonempty != nil:
			if !*j.Nonempty {
				return nil, fmt.Errorf(`attribute %q: "nonempty": false tests nothing; use "present": false`, c.attr)
			}
			c.test = testAttrNonempty
		case j.Matches != nil:
			re, err := regexp.Compile(*j.Matches)
			if err != nil {
				return nil, fmt.Errorf(`attribute %q: "matches": %v`, c.attr, err)
			}
			c.test, c.re = testAttrMatches, re
		}
	case "span_name":
		c.test, c.value = testSpanName, *j.SpanName
	case "span_name_prefix":
		c.test, c.value = testSpanNamePrefix, *j.SpanNamePrefix
	case "span_name_matches":
		re, err := regexp.Compile(*j.SpanNameMatches)
		if err != nil {
			return nil, fmt.Errorf(`"span_name_matches": %v`, err)
		}
		c.test, c.re = testSpanNameMatches, re
	case "kind":
		kind, ok := spanKinds[*j.Kind]
		if !ok {
			return nil, fmt.Errorf(`"kind": want client, server, internal, producer, consumer or unspecified, not %q`, *j.Kind)
		}
		c.test, c.kind = testKind, kind
	case "scope":
		c.test, c.value = testScope, *j.Scope
	case "any":
		if len(*j.Any) == 0 {
			return nil, errors.New(`"any": want at least one condition`)
		}
		c.test = testAny
		for i, rawSub := range *j.Any {
			sub, err := parseCondition(rawSub, bindsOK)
			if err != nil {
				return nil, fmt.Errorf("any[%d]: %w", i, err)
			}
			c.sub = append(c.sub, sub)
		}
	case "not":
		sub, err := parseCondition(j.Not, false)
		if err != nil {
			return nil, fmt.Errorf("not: %w", err)
		}
		c.test, c.sub = testNot, []*condition{sub}
	case "namespace_type":
		if !bindsOK {
			return nil, errors.New(`"namespace_type" under "not" finds no namespace`)
		}
		if len(j.TypeKeys) == 0 || len(j.WithAny) == 0 {
			return nil, errors.New(`"namespace_type": want "type_keys" (what the type attribute is called in its namespace) and "with_any" (the attributes one of which the namespace must hold)`)
		}
		c.test, c.value = testNamespaceType, *j.NamespaceType
		// Longest first: foo.span.type is of namespace foo, not foo.span.
		c.typeKeys = slices.Clone(j.TypeKeys)
		slices.SortStableFunc(c.typeKeys, func(a, b string) int { return len(b) - len(a) })
		c.withAny = j.WithAny
	case "key_ends", "key_contains":
		list := j.KeyEnds
		c.test = testKeyEnds
		if subject == "key_contains" {
			list, c.test = j.KeyContains, testKeyContains
		}
		if len(*list) == 0 || slices.Contains(*list, "") {
			return nil, fmt.Errorf("%q: want at least one non-empty string", subject)
		}
		c.keys, c.lacks = lowerAll(*list), lowerAll(j.KeyLacks)
	}
	return c, nil
}

func parseSource(d *dialect, f spanField, raw json.RawMessage) (*fieldSource, error) {
	s := &fieldSource{slot: -1, fromEntry: d}
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &s.attr); err != nil || s.attr == "" {
			return nil, errors.New("want an attribute name")
		}
		if f == fieldExecutionName {
			return nil, errors.New(`an execution name needs "ranks_as": write {"attr": ..., "ranks_as": ...}`)
		}
		return s, nil
	}
	var j sourceJSON
	if err := strictJSON(raw, &j); err != nil {
		return nil, err
	}
	var subjects []string
	for key, set := range map[string]bool{"attr": j.Attr != nil, "attrs": j.Attrs != nil, "span_name": j.SpanName != nil,
		"span_name_after": j.SpanNameAfter != nil, "in_namespace": j.InNamespace != nil, "key_ends": j.KeyEnds != nil,
		"key_contains": j.KeyContains != nil} {
		if set {
			subjects = append(subjects, key)
		}
	}
	slices.Sort(subjects)
	if len(subjects) != 1 {
		return nil, fmt.Errorf(`want exactly one of "attr", "attrs", "span_name", "span_name_after", "in_namespace", "key_ends", "key_contains"; got %s`, orNone(subjects))
	}
	subject := subjects[0]
	field := spanFields[f]
	if field.attrsOnly && (subject != "attr" && subject != "attrs" || len(j.When) > 0) {
		return nil, fmt.Errorf("%s is also read off resources and span events: give attribute names only, without \"when\"", field.key)
	}
	if (j.Join != nil) != (subject == "attrs") {
		return nil, errors.New(`"attrs" and "join" go together: the attributes, all of which must be there, and what goes between their values`)
	}
	switch subject {
	case "attrs":
		if len(*j.Attrs) < 2 || slices.Contains(*j.Attrs, "") {
			return nil, errors.New(`"attrs": want two or more attribute names`)
		}
		if field.kind != kindString {
			return nil, errors.New(`"attrs": joined attributes make a string`)
		}
		s.kind, s.joinAttrs, s.joinWith = sourceJoin, slices.Clone(*j.Attrs), *j.Join
	case "attr":
		if s.attr = *j.Attr; s.attr == "" {
			return nil, errors.New(`"attr": want an attribute name`)
		}
	case "span_name":
		if !*j.SpanName {
			return nil, errors.New(`"span_name": false reads nothing`)
		}
		s.kind = sourceSpanName
	case "span_name_after":
		if *j.SpanNameAfter == "" {
			return nil, errors.New(`"span_name_after": want a prefix`)
		}
		s.kind, s.attr = sourceSpanNameAfter, *j.SpanNameAfter
	case "in_namespace":
		if *j.InNamespace == "" {
			return nil, errors.New(`"in_namespace": want the attribute's name within the namespace`)
		}
		s.kind, s.attr = sourceInNamespace, *j.InNamespace
	case "key_ends", "key_contains":
		list := j.KeyEnds
		s.kind = sourceKeyEnds
		if subject == "key_contains" {
			list, s.kind = j.KeyContains, sourceKeyContains
		}
		if len(*list) == 0 || slices.Contains(*list, "") {
			return nil, fmt.Errorf("%q: want at least one non-empty string", subject)
		}
		s.keys = lowerAll(*list)
	}
	if (s.kind == sourceSpanName || s.kind == sourceSpanNameAfter) && field.kind != kindString {
		return nil, fmt.Errorf("%q: the span's name is no %s", subject, map[fieldKind]string{kindInt: "number", kindJSON: "JSON"}[field.kind])
	}
	if j.KeyLacks != nil {
		if s.kind != sourceKeyContains {
			return nil, errors.New(`"key_lacks": only with "key_contains"`)
		}
		s.lacks = lowerAll(j.KeyLacks)
	}
	if j.JSONKey != nil {
		if s.kind != sourceAttr || *j.JSONKey == "" || slices.Contains(strings.Split(*j.JSONKey, "."), "") {
			return nil, errors.New(`"json_key": with "attr" only, a dotted path of keys such as "usage.input_tokens"`)
		}
		if field.attrsOnly {
			return nil, fmt.Errorf(`"json_key": %s is also read off resources and span events: give attribute names only`, field.key)
		}
		s.jsonPath = strings.Split(*j.JSONKey, ".")
	}
	if j.Transform != nil {
		if *j.Transform != "unwrap_openllmetry_args" || f != fieldArgs {
			return nil, fmt.Errorf(`"transform": the one transform is "unwrap_openllmetry_args", for args; not %q`, *j.Transform)
		}
		s.unwrap = true
	}
	switch {
	case f == fieldExecutionName && j.RanksAs == nil:
		return nil, fmt.Errorf(`an execution name needs "ranks_as", one of %s`, strings.Join(trace.NameSources[1:], ", "))
	case f == fieldExecutionName:
		s.rank = slices.Index(trace.NameSources, *j.RanksAs)
		if s.rank < 1 {
			return nil, fmt.Errorf(`"ranks_as": want one of %s, not %q`, strings.Join(trace.NameSources[1:], ", "), *j.RanksAs)
		}
		s.rankName = *j.RanksAs
	case j.RanksAs != nil:
		return nil, errors.New(`"ranks_as": only for execution_name`)
	}
	for i, rawCond := range j.When {
		c, err := parseCondition(rawCond, false)
		if err != nil {
			return nil, fmt.Errorf("when[%d]: %w", i, err)
		}
		s.when = append(s.when, c)
	}
	return s, nil
}

// strictJSON decodes data into v, refusing keys v does not have, and says
// which key was wrong in words a span map's author reads.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		if dec.More() {
			return errors.New("more than one JSON value")
		}
		return nil
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return fmt.Errorf("got a JSON %s, want %s", typeErr.Value, jsonTypeName(typeErr.Type.String()))
	case errors.As(err, &typeErr):
		return fmt.Errorf("%q: got a JSON %s, want %s", typeErr.Field, typeErr.Value, jsonTypeName(typeErr.Type.String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("unknown key %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return fmt.Errorf("not JSON: %v", err)
}

func jsonTypeName(goType string) string {
	switch {
	case strings.Contains(goType, "[]json.RawMessage"), strings.Contains(goType, "[]string"):
		return "a list"
	case strings.Contains(goType, "string"):
		return "a string"
	case strings.Contains(goType, "bool"):
		return "true or false"
	}
	return "an object"
}

func orNone(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

func lowerAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = strings.ToLower(s)
	}
	return out
}

// compileSpanMap orders the entries' rules and sources as they are tried,
// and gives every attribute they name a slot. It compiles copies: an
// entry is shared by every map built with it (the built-in ones by all),
// and the slots of one map must not become another's.
func compileSpanMap(shared []*dialect) *SpanMap {
	entries := make([]*dialect, len(shared))
	for i, d := range shared {
		entries[i] = d.clone()
	}
	m := &SpanMap{dialects: entries, slots: map[string]int32{}}
	slot := func(attr string) int32 {
		if n, ok := m.slots[attr]; ok {
			return n
		}
		n := int32(len(m.slots))
		m.slots[attr] = n
		return n
	}
	var resolve func(cs []*condition)
	resolve = func(cs []*condition) {
		for _, c := range cs {
			switch c.test {
			case testAttrEquals, testAttrIn, testAttrPresent, testAttrAbsent, testAttrNonempty, testAttrMatches:
				c.slot = slot(c.attr)
			}
			resolve(c.sub)
		}
	}
	for _, d := range entries {
		for _, rules := range [][]*spanRule{d.tool, d.model, d.http, d.context, d.execution} {
			for _, r := range rules {
				resolve(r.when)
			}
		}
		for f := range d.fields {
			for _, s := range d.fields[f] {
				switch s.kind {
				case sourceAttr:
					s.slot = slot(s.attr)
				case sourceJoin:
					s.joinSlots = make([]int32, len(s.joinAttrs))
					for i, a := range s.joinAttrs {
						s.joinSlots[i] = slot(a)
					}
				}
				resolve(s.when)
				m.fields[f] = append(m.fields[f], s)
			}
		}
	}
	for name, n := range m.slots {
		for len(m.slotsByLength) <= len(name) {
			m.slotsByLength = append(m.slotsByLength, nil)
		}
		m.slotsByLength[len(name)] = append(m.slotsByLength[len(name)], namedSlot{name: name, slot: n})
	}
	// Fallback entries are tried after every other, whatever their place.
	for _, fallback := range []bool{false, true} {
		for _, d := range entries {
			if d.fallback != fallback {
				continue
			}
			for _, r := range d.tool {
				switch {
				case r.evenAtRoot:
					m.evenAtRoot = append(m.evenAtRoot, r)
				case fallback:
					m.fallbackTool = append(m.fallbackTool, r)
				default:
					m.tool = append(m.tool, r)
				}
			}
			if fallback {
				m.fallbackModel = append(m.fallbackModel, d.model...)
			} else {
				m.model = append(m.model, d.model...)
			}
			m.http = append(m.http, d.http...)
			m.context = append(m.context, d.context...)
			m.execution = append(m.execution, d.execution...)
			for _, r := range d.context {
				if r.evenAtRoot {
					m.contextAtRoot = append(m.contextAtRoot, r)
				}
			}
		}
	}
	return m
}

// clone copies the entry's rules, conditions and field sources, the parts
// compiling writes slots into.
func (d *dialect) clone() *dialect {
	c := *d
	c.tool, c.model = cloneRules(&c, d.tool), cloneRules(&c, d.model)
	c.http, c.context = cloneRules(&c, d.http), cloneRules(&c, d.context)
	c.execution = cloneRules(&c, d.execution)
	for f, sources := range d.fields {
		c.fields[f] = make([]*fieldSource, len(sources))
		for i, s := range sources {
			cs := *s
			cs.when, cs.fromEntry, cs.joinSlots = cloneConditions(s.when), &c, slices.Clone(s.joinSlots)
			c.fields[f][i] = &cs
		}
	}
	return &c
}

func cloneRules(d *dialect, rules []*spanRule) []*spanRule {
	if rules == nil {
		return nil
	}
	out := make([]*spanRule, len(rules))
	for i, r := range rules {
		cr := *r
		cr.dialect, cr.when = d, cloneConditions(r.when)
		out[i] = &cr
	}
	return out
}

func cloneConditions(cs []*condition) []*condition {
	if cs == nil {
		return nil
	}
	out := make([]*condition, len(cs))
	for i, c := range cs {
		cc := *c
		cc.sub = cloneConditions(c.sub)
		out[i] = &cc
	}
	return out
}
