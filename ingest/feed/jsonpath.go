package feed

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// JSONValueAt is the value at path in the JSON document data, each
// segment an object member or an array index: a string, or a number as
// sent, as text. ok is false when data is not JSON, the path leads
// nowhere, or the value there is neither (an object, an array, a bool,
// null). The tap reads a response's effect id with a dotted path split
// into segments, the MCP proxies a tools/call result's with a JSON
// pointer's tokens.
func JSONValueAt(data []byte, path []string) (value string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false
	}
	for _, seg := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return "", false
			}
			v = x[i]
		default:
			return "", false
		}
	}
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	}
	return "", false
}
