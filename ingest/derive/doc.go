// Package derive turns events into derived rows: per commit it refolds the
// entities the commit touched from all of their stored events (so the result
// never depends on arrival order) and re-audits every execution whose
// findings the change can affect, storing what trace/ concludes. The writer
// calls it once per commit (Deriver), a prune's re-audit through Reaudit,
// and a change of derivation version through Rebuild. It decides no rule
// itself: trace/ does. It knows no HTTP and no feed.
package derive
