package ingest

import (
	"fmt"
	"path"
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// ToolClass classifies the tools whose names match a glob.
type ToolClass struct {
	Glob  string
	Class trace.EffectClass
}

// ToolClasses classify tool calls that do not say their class; the first
// glob that matches wins.
type ToolClasses []ToolClass

// ParseToolClasses reads "send_*=write,get_*=read,charge_*=unsafe": globs
// as path.Match reads them, each with read, write or unsafe.
func ParseToolClasses(spec string) (ToolClasses, error) {
	var out ToolClasses
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		glob, class, ok := strings.Cut(item, "=")
		glob, class = strings.TrimSpace(glob), strings.TrimSpace(class)
		if !ok || glob == "" {
			return nil, fmt.Errorf("tool class %q: want GLOB=CLASS, such as send_*=write", item)
		}
		if _, err := path.Match(glob, ""); err != nil {
			return nil, fmt.Errorf("tool class %q: bad glob: %v", item, err)
		}
		switch c := trace.EffectClass(class); c {
		case trace.EffectRead, trace.EffectWrite, trace.EffectUnsafe:
			out = append(out, ToolClass{Glob: glob, Class: c})
		default:
			return nil, fmt.Errorf("tool class %q: the class must be read, write or unsafe", item)
		}
	}
	return out, nil
}

// Classify returns the class of the first glob the tool's name matches, or "".
func (tc ToolClasses) Classify(tool string) trace.EffectClass {
	for _, c := range tc {
		if ok, _ := path.Match(c.Glob, tool); ok {
			return c.Class
		}
	}
	return ""
}

// String is the classes in the syntax ParseToolClasses reads.
func (tc ToolClasses) String() string {
	parts := make([]string, len(tc))
	for i, c := range tc {
		parts[i] = c.Glob + "=" + string(c.Class)
	}
	return strings.Join(parts, ",")
}
