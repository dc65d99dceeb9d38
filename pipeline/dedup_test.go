package pipeline

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/dedup"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// TestDropDuplicatesFlag: two sources reading the same archive (a seam that
// overlaps entirely) under --drop-duplicates 'hash' and
// --drop-duplicates-within-watermark 'hash': the deduplication passes each
// block once to the query's aggregation: of the rows read, each block's
// second is dropped as a duplicate. Their ids are Spark's (the
// aggregation, nearest the sink, 0; the deduplication 1), and so is the
// order of stateOperators[].
func TestDropDuplicatesFlag(t *testing.T) {
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	uri := "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"
	count := func(ck string, set func(*Config)) (input, dropped int64, ops []string) {
		t.Helper()
		c := Config{
			Checkpoint: ck, Table: ck + "-table", LocalDir: filepath.Join(t.TempDir(), "local"), FS: vfs.NewMem(),
			Sources: []SourceSpec{{Name: "a", Format: "s3archive", URI: uri}, {Name: "b", Format: "s3archive", URI: uri}},
			Conf:    map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
			Query:   "SELECT count(*) AS n FROM blocks", Trigger: engine.Trigger{Kind: engine.AvailableNow},
			Logger: slog.New(slog.DiscardHandler), Clock: stream.SystemClock{},
		}
		set(&c)
		var last []stream.OperatorProgress
		c.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
			input += p.NumInputRows
			if len(p.StateOperators) > 0 && p.NumInputRows > 0 {
				last = p.StateOperators
			}
			for _, op := range p.StateOperators {
				dropped += op.CustomMetrics[dedup.MetricDroppedDuplicates]
			}
		})}
		q, opts, err := Build(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Run(t.Context(), q, opts); err != nil {
			t.Fatal(err)
		}
		for _, op := range last {
			ops = append(ops, op.OperatorName)
		}
		return input, dropped, ops
	}
	both, _, plain := count("/plain", func(*Config) {})
	if len(plain) != 1 || both == 0 || both%2 != 0 {
		t.Fatalf("without the flag: operators %v, %d rows read", plain, both)
	}
	for _, c := range []struct {
		name string
		set  func(*Config)
		op   string
	}{
		{"dropDuplicates", func(c *Config) { c.DropDuplicates = "hash" }, dedup.OperatorName},
		{"withinWatermark", func(c *Config) {
			c.DropDuplicatesWithinWatermark, c.WithWatermark = "HASH", "block_ts, 1 hour"
		}, dedup.OperatorNameWithinWatermark},
	} {
		t.Run(c.name, func(t *testing.T) {
			input, dropped, ops := count("/"+c.name, c.set)
			if len(ops) != 2 || ops[0] != agg.OperatorName || ops[1] != c.op {
				t.Fatalf("operators %v, want the aggregation then %s", ops, c.op)
			}
			// Every block is read twice, and its second row dropped.
			if input != both || dropped != both/2 {
				t.Fatalf("%d rows read, %d dropped as duplicates; want %d and %d", input, dropped, both, both/2)
			}
		})
	}
}

// TestDropDuplicatesAddedRefused: adding --drop-duplicates to a checkpoint
// written without it puts another operator at id 0: the start is refused
// before the checkpoint changes. (The code is the engine's committed-state
// check's, CHECKPOINT_CORRUPT on the missing state/1, which runs before the
// restart rules would say STATE_SCHEMA_MISMATCH for the operator added; an
// aggregation added to a flow plan meets the same order.)
func TestDropDuplicatesAddedRefused(t *testing.T) {
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	uri := "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"
	fs := vfs.NewMem()
	c := Config{
		Checkpoint: "/ck", Table: "/ck-table", LocalDir: filepath.Join(t.TempDir(), "local"), FS: fs,
		Sources: []SourceSpec{{Name: "a", Format: "s3archive", URI: uri}},
		Conf:    map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Query:   "SELECT count(*) AS n FROM blocks", Trigger: engine.Trigger{Kind: engine.AvailableNow}, MaxBatches: 1,
		Logger: slog.New(slog.DiscardHandler), Clock: stream.SystemClock{},
	}
	run := func(c Config) error {
		q, opts, err := Build(c)
		if err != nil {
			return err
		}
		_, err = engine.Run(t.Context(), q, opts)
		return err
	}
	if err := run(c); err != nil {
		t.Fatal(err)
	}
	before := memTree(t, fs, "/ck")
	c.DropDuplicates = "hash"
	// A changed query, not damage: the restart rules' refusal (the start
	// check once judged the new operator's empty state/1 as lost files).
	if err := run(c); errcode.Code(err) != errcode.StateSchemaMismatch {
		t.Fatalf("got %v, want STATE_SCHEMA_MISMATCH", err)
	}
	if after := memTree(t, fs, "/ck"); after != before {
		t.Fatalf("a refused start changed the checkpoint:\n%s\nwas\n%s", after, before)
	}
}

// memTree lists every file under dir of fs with its content.
func memTree(t *testing.T, fs vfs.FS, dir string) string {
	t.Helper()
	var out strings.Builder
	var walk func(d string)
	walk = func(d string) {
		names, err := fs.List(d)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		for _, n := range names {
			p := fs.PathJoin(d, n)
			st, err := fs.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.IsDir() {
				out.WriteString(p + "/\n")
				walk(p)
				continue
			}
			f, err := fs.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%s %x\n", p, b)
		}
	}
	walk(dir)
	return out.String()
}
