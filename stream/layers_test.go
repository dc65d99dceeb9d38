package stream_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayers pins the package graph: the leaves (stream, errcode, durable, readahead, interval)
// import nothing of ethstream, the plugins (state, agg, sources, sink,
// checkpoint) never import the loop, and the loop knows no Ethereum names. It asks the go tool for the real
// transitive imports, so a new import anywhere below shows up here.
func TestLayers(t *testing.T) {
	const mod = "github.com/ethstream/ethstream/"
	rules := []struct {
		pkg       string
		forbidden []string // module-relative import paths pkg must not reach
	}{
		{"stream", []string{"*"}},
		{"errcode", []string{"*"}},
		{"internal/s3client", []string{"*"}},
		{"internal/durable", []string{"*"}},
		{"internal/readahead", []string{"*"}},
		{"internal/interval", []string{"*"}},
		{"ethblock", []string{"engine", "checkpoint", "state", "agg", "sink/delta", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo"}},
		{"checkpoint", []string{"engine", "stream", "state", "agg", "sink/delta", "ethblock", "pipeline", "demo"}},
		{"internal/logtest", []string{"engine", "stream", "state", "agg", "sink/delta", "ethblock", "sources/s3archive", "sources/ethrpc", "shape", "pipeline", "demo"}},
		{"state", []string{"engine", "agg", "sink/delta", "ethblock", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo"}},
		{"agg", []string{"engine", "sink/delta", "ethblock", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo"}},
		{"sink/delta", []string{"engine", "state", "agg", "ethblock", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo"}},
		{"sources/s3archive", []string{"engine", "state", "agg", "sink/delta", "ethblock", "sources/ethrpc", "pipeline", "demo"}},
		{"sources/ethrpc", []string{"engine", "state", "agg", "sink/delta", "sources/s3archive", "pipeline", "demo"}},
		// The Delta source and sink share the log's reading (internal/deltalog);
		// neither imports the other.
		{"sources/deltasource", []string{"engine", "state", "agg", "sink/delta", "ethblock", "pipeline", "demo"}},
		{"internal/deltalog", []string{"engine", "checkpoint", "state", "agg", "sink/delta", "sources/deltasource", "ethblock", "pipeline", "demo", "query", "filter"}},
		{"engine", []string{"ethblock", "chain", "sources/s3archive", "sources/ethrpc", "agg", "state", "sink/delta", "pipeline", "demo", "query", "filter"}},
		{"filter", []string{"engine", "checkpoint", "state", "agg", "sink/delta", "ethblock", "chain", "pipeline", "demo", "query", "shape"}},
		{"shape", []string{"engine", "stream", "state", "agg", "sink/delta", "ethblock", "chain", "pipeline", "demo", "query", "filter"}},
		// The dashboard shows any query; the demo is adapted to it where the
		// two are wired (cmd/ethstream).
		{"ui", []string{"demo", "engine", "pipeline", "chain"}},
		{"query", []string{"engine", "sink/delta", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo", "shape"}},
		// The copy of a stopped query moves files; it knows no query.
		{"relocate", []string{"engine", "state", "agg", "sink/delta", "ethblock", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo", "query", "filter", "shape"}},
		// The test harness twins the stream contracts and nothing else, so
		// that the tests of every layer (the engine's own included) may use it.
		{"internal/streamtest", []string{"engine", "checkpoint", "state", "agg", "sink/delta", "ethblock", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo", "query", "filter", "shape", "storage", "internal/durable"}},
		// The differential test's oracle is written without the code it
		// checks: it reads rows and its own AST, nothing of the SQL path.
		{"internal/sparkref", []string{"engine", "checkpoint", "state", "agg", "filter", "query", "sink/delta", "ethblock", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo", "shape", "storage"}},
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", mod+r.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", r.pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			rel, ok := strings.CutPrefix(dep, mod)
			if !ok || rel == r.pkg {
				continue
			}
			for _, f := range r.forbidden {
				if f == "*" || rel == f {
					t.Errorf("%s imports %s (directly or not); the layering forbids it", r.pkg, rel)
				}
			}
		}
	}
}

// TestHarnessOnlyInTests pins that internal/streamtest, internal/logtest
// and internal/sparkref are test support: no package's production code imports them (tests do).
func TestHarnessOnlyInTests(t *testing.T) {
	for _, harness := range []string{"github.com/ethstream/ethstream/internal/streamtest", "github.com/ethstream/ethstream/internal/logtest", "github.com/ethstream/ethstream/internal/sparkref"} {
		harnessOnlyInTests(t, harness)
	}
}

func harnessOnlyInTests(t *testing.T, harness string) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "github.com/ethstream/ethstream/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == harness {
			continue
		}
		for _, dep := range f[1:] {
			if dep == harness {
				t.Errorf("%s imports %s (directly or not): it is for tests only", f[0], harness)
			}
		}
	}
}
