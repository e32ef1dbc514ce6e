package trace

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
