package trace

// DerivationVersion names the rules by which this package derives state
// from events: steps, attempts' derived fields, effect states, counts,
// gaps, findings and audit states. The store keeps what they derived as a
// cache stamped with this number; bump it with any change here that alters
// what such a row would hold, and serve and import rebuild an older
// database's cache from its event log at start.
//
// It lives here, beside the rules, so that the change and the bump are one
// diff; the store only records it.
//
//	1: the first stamped rules.
//	2: a replay answered from the journal is not a retry (fc66ffe).
//	3: an orphan is decided by AttemptIndex, which matches a key only at
//	   the provider it was sent to, as the rest of the audit does.
//	4: evidence from the outbox (identical effects of one run are a
//	   duplicate, repeated_effect), key_collision within one provider, an
//	   execution's own effects only, and stray traces' effects joined to
//	   the attempt in flight (issue 21).
//	5: an attempt's class beats unknown whatever its events' order (an
//	   MCP client's span and the MCP proxy's event of one call, issue 25).
//	6: findings stored with their place's natural key (store migration
//	   SQLite 0018, PostgreSQL 0011), so that lists of them are in natural
//	   order (issue 24); an unfinished attempt with no start runs until
//	   its execution ends (a Temporal activity's pending attempt, issue 26).
const DerivationVersion = 6
