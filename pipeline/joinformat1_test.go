package pipeline

import (
	"bytes"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// TestJoinFormat1CheckpointResumes reads a join state main wrote in join
// state format 1 (testdata/joinformat1, README.md: values as JSON text,
// two batches of a left outer join): state dump prints it byte for byte
// as main did; the query resumes on it, reads the stored rows, evicts
// them (emitting the outer rows) and writes format 2; and its table and
// final state dump are those of main's own run from scratch, as is a run
// from scratch of this code, whose state is format 2 throughout.
func TestJoinFormat1CheckpointResumes(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	copyTree(t, "testdata/joinformat1/in", in)
	for n := range 3 {
		at := time.Date(2024, 3, 1, 0, n, 0, 0, time.UTC)
		for _, side := range []string{"l", "r"} {
			if err := os.Chtimes(filepath.Join(in, side, "part-"+string(rune('0'+n))+".csv"), at, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	const schema = "k STRING, ts TIMESTAMP, v BIGINT, d DOUBLE, name STRING"
	cfg := func(name string) Config {
		src := func(side string) SourceSpec {
			return SourceSpec{Name: side, Format: "csv", URI: "file://" + filepath.Join(in, side) +
				"?header=true&maxFilesPerTrigger=1&schema=" + url.QueryEscape(schema)}
		}
		return Config{
			Checkpoint: filepath.Join(dir, name, "checkpoint"), Table: filepath.Join(dir, name, "table"), LocalDir: filepath.Join(dir, name, "local"),
			Sources: []SourceSpec{src("l"), src("r")},
			Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
				"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
			Query: "SELECT a.k, a.ts, a.v, a.d, a.name, b.ts AS r_ts, b.v AS r_v, b.name AS r_name " +
				"FROM l WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS a LEFT JOIN r WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS b " +
				"ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL 1 MINUTE AND a.ts + INTERVAL 1 MINUTE",
			OutputMode: "append",
			Trigger:    engine.Trigger{Kind: engine.AvailableNow},
			Logger:     slog.New(slog.DiscardHandler),
			Clock:      stream.SystemClock{},
		}
	}
	dump := func(ck string) string {
		t.Helper()
		var b bytes.Buffer
		// The query's output columns first, as the CLI's state dump orders them.
		cols := []string{"k", "ts", "v", "d", "name", "r_ts", "r_v", "r_name"}
		if _, err := state.Dump(ctx, state.DumpOptions{FS: vfs.Default, Checkpoint: ck, Batch: -1, Columns: cols}, &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	table := func(path string) []string {
		t.Helper()
		var b bytes.Buffer
		if err := delta.Show(ctx, &b, path, "csv", -1); err != nil {
			t.Fatal(err)
		}
		return sortedLines(b.String())
	}
	spec := func(ck string, v int) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(ck, "state", "0", "0000000000000000000"+string(rune('0'+v))+".0.meta"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	resumed := cfg("resumed")
	copyTree(t, "testdata/joinformat1/checkpoint", resumed.Checkpoint)
	copyTree(t, "testdata/joinformat1/table", resumed.Table)
	// The file sources' and the table's locations are recorded (the shape,
	// the file logs): move them here, as a user moving the files, the table
	// and the checkpoint together would.
	logs, _ := filepath.Glob(filepath.Join(resumed.Checkpoint, "sources", "*", "*"))
	shapes, _ := filepath.Glob(filepath.Join(resumed.Checkpoint, "shape", "*"))
	for _, l := range append(logs, shapes...) {
		b := readFile(t, l)
		b = bytes.ReplaceAll(b, []byte("/tmp/i43join/jf/in"), []byte(in))
		b = bytes.ReplaceAll(b, []byte("/tmp/i43join/jf/table"), []byte(resumed.Table))
		if err := os.WriteFile(l, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if m := spec(resumed.Checkpoint, 1); !strings.Contains(m, `"spec":"join/v1 `) {
		t.Fatalf("the fixture's state version 1 is not join state format 1: %s", m)
	}
	if got, want := dump(resumed.Checkpoint), string(readFile(t, "testdata/joinformat1/dump-batch1.csv")); got != want {
		t.Fatalf("dump of the format-1 state:\n%s\nmain printed:\n%s", got, want)
	}
	if _, err := Run(ctx, resumed); err != nil {
		t.Fatal(err)
	}
	if m := spec(resumed.Checkpoint, 2); !strings.Contains(m, `"spec":"join/v3 `) {
		t.Fatalf("the resumed query's state version 2 is not format 3: %s", m)
	}
	wantTable := sortedLines(string(readFile(t, "testdata/joinformat1/table-final.csv")))
	// Format 3 counts only the keys of two values or more: main's state
	// less its counts of one.
	wantDump := withoutCountsOfOne(string(readFile(t, "testdata/joinformat1/dump-final.csv")))
	if got := table(resumed.Table); !slices.Equal(got, wantTable) {
		t.Fatalf("resumed table:\n%s\nmain's:\n%s", strings.Join(got, "\n"), strings.Join(wantTable, "\n"))
	}
	if got := dump(resumed.Checkpoint); got != wantDump {
		t.Fatalf("resumed final state:\n%s\nmain's:\n%s", got, wantDump)
	}

	scratch := cfg("scratch")
	if _, err := Run(ctx, scratch); err != nil {
		t.Fatal(err)
	}
	if m := spec(scratch.Checkpoint, 0); !strings.Contains(m, `"spec":"join/v3 `) {
		t.Fatalf("a new query's state is not format 3: %s", m)
	}
	if got := table(scratch.Table); !slices.Equal(got, wantTable) {
		t.Fatalf("table from scratch:\n%s\nmain's:\n%s", strings.Join(got, "\n"), strings.Join(wantTable, "\n"))
	}
	// A new checkpoint's join keeps only the columns the query reads
	// (column pruning): the same rows without the right side's d and
	// either side's source, which the resumed state, written with every
	// column, keeps.
	wantPruned := withoutCountsOfOne(string(readFile(t, "testdata/joinformat1/dump-final-pruned.csv")))
	if got := dump(scratch.Checkpoint); got != wantPruned {
		t.Fatalf("final state from scratch:\n%s\nwant:\n%s", got, wantPruned)
	}
}

// withoutCountsOfOne is a join state's dump without the keyToNumValues
// rows of the keys of one value, which join state format 3 does not store.
func withoutCountsOfOne(dump string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(dump, "\n") {
		if !strings.Contains(l, `,keyToNumValues,null,"{""value"":1}",`) {
			b.WriteString(l)
		}
	}
	return b.String()
}

// sortedLines is the lines of s after its header line, sorted.
func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	rows := slices.Clone(lines[1:])
	slices.Sort(rows)
	return append([]string{lines[0]}, rows...)
}
