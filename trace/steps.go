package trace

import "strconv"

// Class is the step's effect class, or its attempts' when the step itself
// names none: events describe the class per attempt, and a step built from
// them may not have it copied up.
func (s Step) Class() EffectClass {
	if s.Effect != "" {
		return s.Effect
	}
	for _, a := range s.Attempts {
		if a.Effect != "" {
			return a.Effect
		}
	}
	return ""
}

// ToolName is the step's tool, or its attempts' when the step names none.
func (s Step) ToolName() string {
	if s.Tool != "" {
		return s.Tool
	}
	for _, a := range s.Attempts {
		if a.Tool != "" {
			return a.Tool
		}
	}
	return ""
}

// ProviderName is the step's provider, or its attempts' when the step names
// none.
func (s Step) ProviderName() string {
	if s.Provider != "" {
		return s.Provider
	}
	for _, a := range s.Attempts {
		if a.Provider != "" {
			return a.Provider
		}
	}
	return ""
}

// Step ids derived from OpenTelemetry spans (ingest's mapping) start with
// these: a hash of tool and arguments, a call id, a span id. They identify,
// but mean nothing to a reader.
var derivedStepPrefixes = []string{"tool-", "call-", "span-"}

// DerivedStepID reports whether a step id was derived from a span rather
// than sent.
func DerivedStepID(id string) bool {
	for _, p := range derivedStepPrefixes {
		if len(id) > len(p) && id[:len(p)] == p {
			return true
		}
	}
	return false
}

// StepNames names each step of steps (in step order) for readers: a step
// id that was sent is its name; a derived one is named after its tool,
// numbered when the run has several derived steps of that tool
// ("send_invoice_email #2"), never a hash.
func StepNames(steps []Step) map[string]string {
	names := make(map[string]string, len(steps))
	total := map[string]int{}
	for _, s := range steps {
		if DerivedStepID(s.ID) && s.ToolName() != "" {
			total[s.ToolName()]++
		}
	}
	seen := map[string]int{}
	for _, s := range steps {
		tool := s.ToolName()
		switch {
		case !DerivedStepID(s.ID) || tool == "":
			names[s.ID] = s.ID
		case total[tool] == 1:
			names[s.ID] = tool
		default:
			seen[tool]++
			names[s.ID] = tool + " #" + strconv.Itoa(seen[tool])
		}
	}
	return names
}
