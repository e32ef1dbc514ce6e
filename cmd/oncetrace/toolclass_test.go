package main

import (
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/trace"
)

func TestServeToolClassFlagAndEnv(t *testing.T) {
	c, err := serveFlags([]string{"--tool-class", "send_*=write, get_*=read,charge_*=unsafe"})
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]trace.EffectClass{"send_invoice_email": trace.EffectWrite, "get_weather": trace.EffectRead,
		"charge_card": trace.EffectUnsafe, "lookup": ""} {
		if got := c.toolClasses.Classify(tool); got != want {
			t.Errorf("Classify(%q): got %q, want %q", tool, got, want)
		}
	}

	t.Setenv("ONCETRACE_TOOL_CLASS", "notify_*=write")
	c, err = serveFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.toolClasses.Classify("notify_team"); got != trace.EffectWrite {
		t.Errorf("from the environment: got %q, want write", got)
	}

	for _, bad := range []string{"send_*", "send_*=delete", "[=write"} {
		_, err := serveFlags([]string{"--tool-class", bad})
		if err == nil || !strings.Contains(err.Error(), "--tool-class") {
			t.Errorf("--tool-class %q: got %v, want an error naming the flag", bad, err)
		}
	}
}
