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
		{"s3client", []string{"*"}},
		{"durable", []string{"*"}},
		{"readahead", []string{"*"}},
		{"interval", []string{"*"}},
		{"ethblock", []string{"engine", "checkpoint", "state", "agg", "sink/delta", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo"}},
		{"checkpoint", []string{"engine", "stream", "state", "agg", "sink/delta", "ethblock", "pipeline", "demo"}},
		{"state", []string{"engine", "agg", "sink/delta", "ethblock", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo"}},
		{"agg", []string{"engine", "sink/delta", "ethblock", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo"}},
		{"sink/delta", []string{"engine", "state", "agg", "ethblock", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo"}},
		{"sources/s3archive", []string{"engine", "state", "agg", "sink/delta", "sources/ethrpc", "pipeline", "demo"}},
		{"sources/ethrpc", []string{"engine", "state", "agg", "sink/delta", "sources/s3archive", "pipeline", "demo"}},
		{"engine", []string{"ethblock", "chain", "sources/s3archive", "sources/ethrpc", "agg", "state", "sink/delta", "pipeline", "demo", "query", "filter"}},
		{"filter", []string{"engine", "checkpoint", "state", "agg", "sink/delta", "ethblock", "chain", "pipeline", "demo", "query", "shape"}},
		{"shape", []string{"engine", "stream", "state", "agg", "sink/delta", "ethblock", "chain", "pipeline", "demo", "query", "filter"}},
		{"query", []string{"engine", "sink/delta", "sources/s3archive", "sources/ethrpc", "chain", "pipeline", "demo", "shape"}},
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
