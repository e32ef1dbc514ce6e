package sandbox

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultKind names a fault the sandbox can inject.
type FaultKind string

const (
	// LoseResponse delivers, stores the response under the key, then never
	// answers (until the client gives up) or answers 504: the client cannot
	// know the email went out.
	LoseResponse FaultKind = "lose-response"
	// FailBefore answers 503 without delivering or storing anything.
	FailBefore FaultKind = "fail-before"
	// Latency delays a delivery, its key held in flight meanwhile; replays,
	// conflicts and rejections are answered at once.
	Latency FaultKind = "latency"
)

// Fault is one fault with the probability that it strikes a request.
type Fault struct {
	Kind        FaultKind     `json:"kind"`
	Probability float64       `json:"probability"`     // 0 < p ≤ 1
	Delay       time.Duration `json:"delay,omitempty"` // for latency
	// Answer504, for lose-response, answers 504 at once instead of holding
	// the connection until the client times out.
	Answer504 bool `json:"answer_504,omitempty"`
}

// String is the fault in the syntax ParseFault reads.
func (f Fault) String() string {
	s := string(f.Kind)
	if f.Kind == Latency {
		s += "=" + f.Delay.String()
	}
	if f.Answer504 {
		s += ";mode=504"
	}
	if f.Probability != 1 {
		s += ";p=" + strconv.FormatFloat(f.Probability, 'g', -1, 64)
	}
	return s
}

// ParseFaults reads a comma-separated list of faults, each
// "lose-response", "fail-before" or "latency=DURATION", optionally followed
// by ";p=PROBABILITY" and, for lose-response, ";mode=504". It is the syntax
// of the X-Oncetrace-Fault header and of serve's --sandbox-fault flag.
func ParseFaults(spec string) ([]Fault, error) {
	var out []Fault
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		f, err := parseFault(item)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func parseFault(item string) (Fault, error) {
	parts := strings.Split(item, ";")
	kind, arg, _ := strings.Cut(strings.TrimSpace(parts[0]), "=")
	f := Fault{Kind: FaultKind(kind), Probability: 1}
	switch f.Kind {
	case LoseResponse, FailBefore:
		if arg != "" {
			return f, fmt.Errorf("fault %q: %s takes no value", item, kind)
		}
	case Latency:
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 || d > 10*time.Minute {
			return f, fmt.Errorf("fault %q: latency needs a duration from 1ns to 10m, such as latency=500ms", item)
		}
		f.Delay = d
	default:
		return f, fmt.Errorf("fault %q: kind must be lose-response, fail-before or latency=DURATION", item)
	}
	for _, opt := range parts[1:] {
		name, value, _ := strings.Cut(strings.TrimSpace(opt), "=")
		switch name {
		case "p":
			p, err := strconv.ParseFloat(value, 64)
			if err != nil || p <= 0 || p > 1 {
				return f, fmt.Errorf("fault %q: p must be a probability in (0, 1]", item)
			}
			f.Probability = p
		case "mode":
			if f.Kind != LoseResponse || value != "504" {
				return f, fmt.Errorf("fault %q: only lose-response takes mode=504", item)
			}
			f.Answer504 = true
		default:
			return f, fmt.Errorf("fault %q: unknown option %q (p=, mode=504)", item, name)
		}
	}
	return f, nil
}

// Validate checks a fault that arrived as JSON.
func (f Fault) Validate() error {
	_, err := parseFault(f.String())
	return err
}
