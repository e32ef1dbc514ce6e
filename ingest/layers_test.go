package ingest_test

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layerRule says which of the module's packages a set of them may import.
// Patterns are paths from the module's root: "store" is that package alone,
// "store/..." it and those under it, "..." every package.
type layerRule struct {
	why    string   // what the rule keeps true; a failure quotes it
	from   string   // the importers it binds
	except []string // importers it spares
	// only, when not nil, lists all the module's packages they may import
	// (empty: none); never lists some they must not.
	only  []string
	never []string
}

// layers are the design card's dependency directions (STYLE.md, "The layout
// and which way dependencies point"; DESIGN.md, "Storage").
var layers = []layerRule{
	{why: "ingest is pure decoding: of ours it imports trace alone",
		from: "ingest", only: []string{"trace"}},
	{why: "feeds write through the writer, never the store, and serve no web",
		from: "ingest/feed/...", never: []string{"store/...", "web/..."}},
	{why: "the writer knows no HTTP and no feed that writes through it",
		from: "ingest/writer/...", never: []string{"web/...", "ingest/feed/..."}},
	{why: "alerts read the findings of the writer's commits, nothing else of ours",
		from: "ingest/writer/alert", only: []string{"trace"}},
	{why: "the domain imports nothing of ours",
		from: "trace/...", only: []string{}},
	{why: "the store is used by ingest and web, never the other way round",
		from: "store/...", never: []string{"ingest/...", "web/..."}},
	{why: "only the commands wire the server",
		from: "...", except: []string{"cmd/...", "web/..."}, never: []string{"web/..."}},
	{why: "nothing imports a command",
		from: "...", never: []string{"cmd/..."}},
	{why: "derivation reads and writes the store by trace's rules, and knows no HTTP, feed or writer",
		from: "ingest/derive", only: []string{"ingest", "store", "trace"}},
}

// TestLayers holds every package's imports (its non-test files; a test may
// wire the whole server, as serve does) to the layers.
func TestLayers(t *testing.T) {
	root, module := moduleRoot(t)
	graph, err := moduleImports(root, module)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"ingest", "ingest/feed", "ingest/feed/tap", "ingest/writer", "ingest/derive", "store", "trace", "web"} {
		if graph[pkg] == nil {
			t.Fatalf("read no package %s under %s: the walk is broken, so it would pass anything", pkg, root)
		}
	}
	for _, breach := range layerBreaches(layers, graph) {
		t.Error(breach)
	}
}

// TestLayersCatchEachBreach feeds each rule an import that breaks it, and
// one that it allows.
func TestLayersCatchEachBreach(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		breaks   string // the rule's why; "" when allowed
	}{
		{"ingest", "trace", ""},
		{"ingest", "store", layers[0].why},
		{"ingest", "ingest/writer", layers[0].why},
		{"ingest/feed", "ingest/writer", ""},
		{"ingest/feed/tap", "ingest/feed/sandbox", ""},
		{"ingest/feed/sandbox", "store", layers[1].why},
		{"ingest/feed/smtpsink", "store/sqlite", layers[1].why},
		{"ingest/feed/tap", "web", layers[1].why},
		{"ingest/writer", "store", ""},
		{"ingest/writer", "web", layers[2].why},
		{"ingest/writer", "ingest/feed", layers[2].why},
		{"ingest/writer/alert", "store", layers[3].why},
		{"trace", "ingest", layers[4].why},
		{"store/postgres", "store", ""},
		{"store", "ingest", layers[5].why},
		{"store/sqlite", "web", layers[5].why},
		{"views", "web", layers[6].why},
		{"cmd/oncetrace", "web", ""},
		{"web", "cmd/oncetrace", layers[7].why},
		{"ingest/writer", "ingest/derive", ""},
		{"ingest/derive", "store", ""},
		{"ingest/derive", "ingest/writer", layers[8].why},
		{"ingest/derive", "ingest/feed", layers[8].why},
		{"ingest/derive", "web", layers[6].why},
	} {
		graph := map[string]map[string]string{tc.from: {tc.to: tc.from + "/x.go"}}
		breaches := layerBreaches(layers, graph)
		switch {
		case tc.breaks == "" && len(breaches) > 0:
			t.Errorf("%s -> %s: got %q, want it allowed", tc.from, tc.to, breaches)
		case tc.breaks != "" && !slices.ContainsFunc(breaches, func(b string) bool { return strings.HasSuffix(b, ": "+tc.breaks) }):
			t.Errorf("%s -> %s: got %q, want a breach of %q", tc.from, tc.to, breaches, tc.breaks)
		}
	}
}

// layerBreaches names each import that breaks a rule, with the file that
// makes it.
func layerBreaches(rules []layerRule, graph map[string]map[string]string) []string {
	var breaches []string
	for _, pkg := range slices.Sorted(maps.Keys(graph)) {
		for _, rule := range rules {
			if !matchPackage(rule.from, pkg) || slices.ContainsFunc(rule.except, func(p string) bool { return matchPackage(p, pkg) }) {
				continue
			}
			for _, imported := range slices.Sorted(maps.Keys(graph[pkg])) {
				allowed := rule.only == nil || slices.ContainsFunc(rule.only, func(p string) bool { return matchPackage(p, imported) })
				forbidden := slices.ContainsFunc(rule.never, func(p string) bool { return matchPackage(p, imported) })
				if !allowed || forbidden {
					breaches = append(breaches, graph[pkg][imported]+" imports "+imported+": "+rule.why)
				}
			}
		}
	}
	return breaches
}

// matchPackage reports whether pkg, a path from the module's root, is one
// pattern names.
func matchPackage(pattern, pkg string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// moduleImports reads the imports of every non-test Go file under root
// (whatever its build constraints) and keeps those of the module: package ->
// imported package -> a file that imports it, all as paths from the root.
func moduleImports(root, module string) (map[string]map[string]string, error) {
	graph := map[string]map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if file != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, file)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		pkg := path.Dir(rel)
		if graph[pkg] == nil {
			graph[pkg] = map[string]string{}
		}
		for _, spec := range f.Imports {
			imported, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if ours, ok := strings.CutPrefix(imported, module+"/"); ok {
				if _, seen := graph[pkg][ours]; !seen {
					graph[pkg][ours] = rel
				}
			}
		}
		return nil
	})
	return graph, err
}

// moduleRoot finds the directory of go.mod above the test's and the
// module's path.
func moduleRoot(t *testing.T) (root, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			lines := bufio.NewScanner(f)
			for lines.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(lines.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(m), `"`)
				}
			}
			t.Fatalf("%s/go.mod names no module", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
