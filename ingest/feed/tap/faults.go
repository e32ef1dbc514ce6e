package tap

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
)

// ParseFaults reads standing faults: the sandbox's syntax
// (lose-response;p=0.1, fail-before, latency=500ms;p=0.5, comma-separated;
// see sandbox.ParseFaults), plus a shorthand for a rate:
// lose-response=0.1 and fail-before=0.05 mean the fault with that
// probability.
func ParseFaults(spec string) ([]sandbox.Fault, error) {
	var out []sandbox.Fault
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		head, rest, _ := strings.Cut(item, ";")
		kind, rate, hasRate := strings.Cut(head, "=")
		if hasRate && (kind == string(sandbox.LoseResponse) || kind == string(sandbox.FailBefore)) {
			p, err := strconv.ParseFloat(rate, 64)
			if err != nil || p <= 0 || p > 1 {
				return nil, fmt.Errorf("fault %q: the rate of %s must be a probability in (0, 1], such as %s=0.1", item, kind, kind)
			}
			if strings.Contains(rest, "p=") {
				return nil, fmt.Errorf("fault %q: give the rate once, as %s=RATE or ;p=RATE", item, kind)
			}
			item = kind + ";p=" + rate
			if rest != "" {
				item += ";" + rest
			}
		}
		fs, err := sandbox.ParseFaults(item)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}
