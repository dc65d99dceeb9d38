package files

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	filesink "github.com/ethstream/ethstream/sink/files"
	"github.com/ethstream/ethstream/stream"
)

// TestReadsFileSinkOutput: a directory a file sink wrote is read through
// its _spark_metadata log, as Spark's FileStreamSource reads one: a part
// file the log does not list (a batch that crashed before its commit) is
// never read.
func TestReadsFileSinkOutput(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	sink := &filesink.Sink{FS: vfs.Default, Dir: dir, URI: "file:" + filepath.ToSlash(dir), CompactInterval: 2}
	schema := stream.Schema{Fields: []stream.Field{{Name: "name", Type: stream.String}, {Name: "amount", Type: stream.Float64}}}
	if err := sink.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: schema}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for b := range int64(3) {
		batch := &stream.Batch{Len: 2, Columns: []stream.Column{
			{Name: "name", Type: stream.String, Strings: []string{"a" + fmtFloat(float64(b)), "b" + fmtFloat(float64(b))}},
			{Name: "amount", Type: stream.Float64, Float64s: []float64{float64(b), float64(b) + 0.5}}}}
		if _, err := sink.AddBatch(ctx, b, batch); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			want = append(want, rowString(batch, i))
		}
	}
	// An orphan: a part file no log entry names.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "part-") {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			if err := os.WriteFile(filepath.Join(dir, "part-00000-orphan-c000.snappy.parquet"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	s := mustSource(t, Parquet, fileLoc(dir)+"?schema="+url.QueryEscape("name STRING, amount DOUBLE"))
	if err := s.Open(t.Context(), testEnv(t)); err != nil {
		t.Fatal(err)
	}
	got, _ := drain(t, s, nil)
	all := flat(got)
	slices.Sort(all)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("read %v, want %v", all, want)
	}
}
