package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// commit is stamped by make with -ldflags -X, for builds the go command
// records no commit for: it records none in a git worktree (a .git file,
// not a directory), nor with -buildvcs=false.
var commit = ""

// buildVersion describes the binary: the version make build stamps, else
// the module's (a tag or pseudo-version when built by go install or in a
// git checkout), and the commit the go command recorded, else make's.
type buildVersion struct {
	version  string // what "oncetrace version" leads with
	module   string // the main module's path and version, as the build info has them
	commit   string // vcs.revision, else the stamped commit; empty when neither is known
	modified bool   // vcs.modified: built from a tree with uncommitted changes
	goVer    string
}

func readBuildVersion(stamped, stampedCommit string) buildVersion {
	v := buildVersion{version: stamped, commit: stampedCommit}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.goVer = info.GoVersion
	v.module = strings.TrimSpace(info.Main.Path + " " + info.Main.Version)
	if v.version == "" || v.version == "dev" {
		if mv := info.Main.Version; mv != "" && mv != "(devel)" {
			v.version = mv
		}
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.commit = s.Value
		case "vcs.modified":
			v.modified = s.Value == "true"
		}
	}
	return v
}

// write prints the version on its first line, for scripts, and where it
// came from on the next.
func (v buildVersion) write(w io.Writer) {
	fmt.Fprintf(w, "oncetrace %s\n", v.version)
	if v.module != "" {
		fmt.Fprintf(w, "module  %s\n", v.module)
	}
	switch {
	case v.commit == "":
		fmt.Fprintln(w, "commit  unknown (built without VCS information: outside a git checkout, in a git worktree, or with -buildvcs=false; make build stamps it)")
	case v.modified:
		fmt.Fprintf(w, "commit  %s (with uncommitted changes)\n", v.commit)
	default:
		fmt.Fprintf(w, "commit  %s\n", v.commit)
	}
	if v.goVer != "" {
		fmt.Fprintf(w, "go      %s\n", v.goVer)
	}
}
