package store

import (
	"encoding/json"

	"github.com/oncetrace/oncetrace/trace"
)

// Notice is what a commit that stored events tells the other instances
// sharing the database (Engine.Notify; PostgreSQL's NOTIFY): the last
// sequence number it stored, and, when they fit, what the committing
// writer knows and a reader could not cheaply work out: the executions it
// re-audited and the critical findings new in them. A notice only says
// "read the store up to Seq": the events themselves are read from the
// store, which stays the truth on resume.
type Notice struct {
	Seq        int64           `json:"seq"`
	Executions []string        `json:"executions,omitempty"`
	Critical   []trace.Finding `json:"critical,omitempty"`
	// Partial is set when Executions and Critical did not fit and were
	// left out: a reader then takes the executions the events name.
	Partial bool `json:"partial,omitempty"`
}

// maxNoticeBytes keeps a notice under PostgreSQL's 8,000-byte payload
// limit.
const maxNoticeBytes = 7000

// Announce sets what the transaction's notice tells about it beyond its
// last sequence number.
func (t *Tx) Announce(executions []string, critical []trace.Finding) {
	t.announced = Notice{Executions: executions, Critical: critical}
}

// notice is the payload of the transaction's Notify.
func (t *Tx) notice() string {
	n := t.announced
	n.Seq = t.lastSeq
	b, err := json.Marshal(n)
	if err != nil || len(b) > maxNoticeBytes {
		b, _ = json.Marshal(Notice{Seq: t.lastSeq, Partial: true})
	}
	return string(b)
}

// ParseNotice reads a notice's payload.
func ParseNotice(payload string) (Notice, error) {
	var n Notice
	err := json.Unmarshal([]byte(payload), &n)
	return n, err
}
