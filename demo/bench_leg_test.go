package demo

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/pipeline"
)

// TestRunLegProcess: a leg's process gets its spec on standard input, and
// its figures, events and steps are read from its output's last line (a
// line printed before it is not the result).
func TestRunLegProcess(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	got := filepath.Join(dir, "spec.json")
	result := `{"wallMs":1234,"cpuMs":2345,"peakRssBytes":345678901,"events":[{"batchId":4,"stateOperators":[{"numRowsTotal":77}]}],"steps":[{"step":"read","wallMs":1000,"cpuMs":2000}]}`
	script := `cat > "$1"; echo "a log line"; echo '` + result + `'`
	spec := LegSpec{Checkpoint: "/c", Table: "/t", LocalDir: "/l", Sources: []pipeline.SourceSpec{{Name: "a", Format: "s3archive", URI: "file:///x"}},
		Conf: map[string]string{"k": "v"}}
	leg, rec, err := runLegProcess(context.Background(), []string{sh, "-c", script, "leg", got}, spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	var sent LegSpec
	if err := json.Unmarshal(b, &sent); err != nil || !reflect.DeepEqual(sent, spec) {
		t.Fatalf("the leg's process got %s (%v), want %+v", b, err, spec)
	}
	if leg.WallMs != 1234 || leg.CPUMs != 2345 || leg.PeakRSSBytes != 345678901 {
		t.Fatalf("figures %+v", leg)
	}
	if len(rec.events) != 1 || rec.events[0].BatchID != 4 || rec.events[0].StateOperators[0].NumRowsTotal != 77 {
		t.Fatalf("events %+v", rec.events)
	}
	steps := rec.runSteps(leg.WallMs, leg.CPUMs)
	if want := []StepCPU{{Step: "read", WallMs: 1000, CPUMs: 2000}, {Step: "outside steps", WallMs: 234, CPUMs: 345}}; !reflect.DeepEqual(steps, want) {
		t.Fatalf("steps %+v, want %+v", steps, want)
	}
	_, _, err = runLegProcess(context.Background(), []string{sh, "-c", "echo failed to open >&2; exit 2", "leg"}, spec)
	if err == nil || !strings.Contains(err.Error(), "failed to open") {
		t.Fatalf("a failing leg: %v", err)
	}
}

// TestShapesRunAsLegs: with a leg command, each query shape runs in the
// leg's process, which gets the shape's name, directory and source (its
// prerequisite shape first), and the shape's figures are the leg's.
func TestShapesRunAsLegs(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	specs := filepath.Join(dir, "specs")
	result := `{"wallMs":1234,"cpuMs":2345,"peakRssBytes":345678901,"events":[{"batchId":0,"numInputRows":42}]}`
	b := &benchRun{o: BenchOptions{WorkDir: dir, Shapes: []string{"delta-to-delta"}, Log: io.Discard,
		Leg: []string{sh, "-c", `cat >> "$1"; echo; echo '` + result + `'`, "leg", specs}},
		env: &Env{ArchiveRoot: filepath.Join(dir, "archive")}, conf: map[string]string{"k": "v"}}
	var res BenchResult
	if err := benchShapesStage(t.Context(), b, &res); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(specs)
	if err != nil {
		t.Fatal(err)
	}
	var got []LegSpec
	for dec := json.NewDecoder(strings.NewReader(string(raw))); dec.More(); {
		var s LegSpec
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	shapes := filepath.Join(dir, "shapes")
	if len(got) != 2 || got[0].Shape != "stateless" || got[1].Shape != "delta-to-delta" ||
		got[1].ShapeDir != shapes || got[1].Table != shapeTable(shapes, "delta-to-delta") ||
		len(got[1].Sources) != 1 || got[1].Sources[0].Name != ArchiveSource || got[1].Conf["k"] != "v" {
		t.Fatalf("legs run: %+v", got)
	}
	if len(res.Shapes) != 1 {
		t.Fatalf("shapes %+v", res.Shapes)
	}
	if r := res.Shapes[0]; r.Name != "delta-to-delta" || r.Ms != 1234 || r.CPUMs != 2345 || r.PeakRSSBytes != 345678901 || r.InputRows != 42 {
		t.Fatalf("the shape's figures are not its leg's: %+v", r)
	}
	// A leg naming no shape the bench has is refused before it runs.
	if _, _, err := runLegHere(t.Context(), LegSpec{Shape: "joins", Sources: got[1].Sources}); err == nil || !strings.Contains(err.Error(), `"joins"`) {
		t.Fatalf("unknown shape: %v", err)
	}
}
