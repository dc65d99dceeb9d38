package engine

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// TestReadProgressRefusesOtherJSON: a progress log is StreamingQueryProgress
// lines; valid JSON of another kind (Spark listener events, an object
// without the progress fields) is PROGRESS_FILE_CORRUPT naming the line,
// even as the last line, while a torn last line is still skipped.
func TestReadProgressRefusesOtherJSON(t *testing.T) {
	const ev = `{"id":"q","runId":"r","name":null,"timestamp":"2024-01-01T00:00:00.000Z","batchId":3,"numInputRows":1,"stateOperators":[],"sources":[],"sink":{"description":"x"}}`
	rows := []struct {
		name, data string
		events     int
		bad        string // "" = reads; else a substring of the error
	}{
		{"progress events and a torn last line", ev + "\n" + ev + "\n" + `{"id":"q","ru`, 2, ""},
		{"Spark's progress as Spark writes it", `{"id":"q","runId":"r","name":"n","timestamp":"2016-12-05T20:54:20.827Z","batchId":0,"numInputRows":0,"inputRowsPerSecond":0.0,"processedRowsPerSecond":0.0,"durationMs":{"triggerExecution":1},"stateOperators":[],"sources":[],"sink":{"description":"MemorySink"}}` + "\n", 1, ""},
		{"a QueryProgressEvent last", ev + "\n" + `{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent","progress":` + ev + `}`, 0, "line 2 is not a progress event: it is a Spark listener event"},
		{"a SparkListener event", `{"Event":"SparkListenerJobStart","Job ID":0}` + "\n" + ev + "\n", 0, "line 1 is not a progress event: it is a Spark listener event"},
		{"an object without batchId", `{"id":"q","runId":"r","timestamp":"t"}` + "\n", 0, `line 1 is not a progress event: it has no "batchId" field`},
		{"a line that does not parse", "not json\n" + ev + "\n", 0, "line 1 is not a progress event"},
	}
	for _, r := range rows {
		t.Run(strings.ReplaceAll(r.name, " ", "_"), func(t *testing.T) {
			fs := vfs.NewMem()
			f, _ := fs.Create("/p.jsonl", vfs.WriteCategoryUnspecified)
			_, _ = f.Write([]byte(r.data))
			_ = f.Close()
			got, err := ReadProgress(fs, "/p.jsonl")
			if r.bad == "" {
				if err != nil || len(got) != r.events {
					t.Fatalf("%d events, %v; want %d", len(got), err, r.events)
				}
				return
			}
			if !errcode.Is(err, CodeProgressCorrupt) || !strings.Contains(err.Error(), r.bad) || !strings.Contains(err.Error(), "/p.jsonl") {
				t.Fatalf("err = %v, want %s with %q", err, CodeProgressCorrupt, r.bad)
			}
		})
	}
}
