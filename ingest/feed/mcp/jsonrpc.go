package mcp

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// message is one JSON-RPC 2.0 message: a request (method and id), a
// notification (method, no id) or a response (id with result or error).
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (m message) isRequest() bool { return m.Method != "" && hasID(m.ID) }

func (m message) isNotification() bool { return m.Method != "" && !hasID(m.ID) }

func (m message) isResponse() bool { return m.Method == "" && hasID(m.ID) }

func hasID(id json.RawMessage) bool { return len(id) > 0 && !bytes.Equal(id, []byte("null")) }

// idKey is a request id as one string: a number's digits, a string's
// quoted form, so that 7 and "7" stay two ids, as JSON-RPC has them.
func idKey(id json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, id) != nil {
		return string(id)
	}
	return buf.String()
}

// idLabel is a request id for people: 7, or the string without quotes.
func idLabel(id json.RawMessage) string {
	var s string
	if json.Unmarshal(id, &s) == nil {
		return s
	}
	return idKey(id)
}

// parseMessages reads one framed message: an object, or a batch (an array
// of them; the 2025-03-26 revision allowed batches). What is not JSON-RPC
// gives nothing: the proxy passes it on untouched.
func parseMessages(data []byte) []message {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	if data[0] == '[' {
		var batch []message
		if json.Unmarshal(data, &batch) != nil {
			return nil
		}
		return batch
	}
	var m message
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return []message{m}
}

// ClientInfoMeta is where a request names its client when the session
// began without initialize (the sessionless protocol revision the Go SDK
// speaks over stdio).
const ClientInfoMeta = "io.modelcontextprotocol/clientInfo"

// requestParams are what every request's params may carry.
type requestParams struct {
	Meta map[string]json.RawMessage `json:"_meta"`
}

// clientName is the client's name a request's _meta gives, if any.
func (m message) clientName() string {
	var p requestParams
	if json.Unmarshal(m.Params, &p) != nil {
		return ""
	}
	var info struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(p.Meta[ClientInfoMeta], &info) != nil {
		return ""
	}
	return info.Name
}

// cancelledParams are a notifications/cancelled's params: the client gave
// up on the request.
type cancelledParams struct {
	RequestID json.RawMessage `json:"requestId"`
	Reason    string          `json:"reason"`
}

// callParams are a tools/call request's params.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      map[string]any  `json:"_meta"`
}

// callResult is what the proxy reads of a tools/call result.
type callResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// errorText is the first text content of a result that is an error: what
// the tool said went wrong.
func (r callResult) errorText() string {
	for _, c := range r.Content {
		if c.Type == "text" && c.Text != "" {
			return c.Text
		}
	}
	return "the tool answered isError"
}

// toolsListResult is what the proxy reads of a tools/list result.
type toolsListResult struct {
	Tools []struct {
		Name        string `json:"name"`
		Annotations *struct {
			ReadOnlyHint    *bool `json:"readOnlyHint"`
			DestructiveHint *bool `json:"destructiveHint"`
			IdempotentHint  *bool `json:"idempotentHint"`
		} `json:"annotations"`
	} `json:"tools"`
}

// initializeParams and initializeResult name the client and the server.
type initializeParams struct {
	ClientInfo struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"clientInfo"`
}

type initializeResult struct {
	ServerInfo struct {
		Name string `json:"name"`
	} `json:"serverInfo"`
}

// errorResponse is a JSON-RPC error answer to the request with id.
func errorResponse(id json.RawMessage, code int, text string) []byte {
	msg, _ := json.Marshal(text) // a string always marshals
	return []byte(`{"jsonrpc":"2.0","id":` + idKey(id) + `,"error":{"code":` + strconv.Itoa(code) + `,"message":` + string(msg) + `}}`)
}
