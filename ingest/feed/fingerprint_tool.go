package feed

import "github.com/oncetrace/oncetrace/ingest"

// KindTool is the fingerprint of a tool call a protocol proxy saw (an MCP
// tools/call): the server, the tool, its arguments.
const KindTool = "tool"

// ToolCallFingerprint returns the fingerprint and summary of a call of tool
// at server with the JSON arguments args, leaving out the argument fields
// ignore names (keys, nonces, timestamps: what differs between two sends
// of one intent) — what an HTTP request's body gives, with the tool in
// place of the method and path. redact names the fields whose values the
// summary hides.
func ToolCallFingerprint(server, tool string, args []byte, ignore IgnoredFields, redact *ingest.Redactor) (fingerprint, summary string) {
	call := map[string]any{"server": server, "tool": tool}
	var fields []summaryField
	if len(args) > 0 {
		if v, err := decodeSingleJSON(args); err == nil {
			if stripped, err := withoutIgnored(v, ignore, 0); err == nil {
				call["arguments"], fields = stripped, jsonFields(stripped)
			}
		}
		if call["arguments"] == nil {
			call["arguments"] = map[string]any{"sha256": sha256Hex(args)}
		}
	}
	// The arguments were bounded in depth above, so this cannot fail; were
	// it to, the effect would rather have no fingerprint than a wrong one.
	fp, _ := fingerprintOf(KindTool, call)
	return fp, httpSummary("tools/call", tool, fields, redact)
}
