package deltasource

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/fixture"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// golden is the golden table name of shared/testdata/delta-golden
// (package fixture: skipped without it, failed under CI=true).
func golden(t *testing.T, name string) string {
	t.Helper()
	return fixture.Shared(t, "delta-golden/"+name)
}

func tableURI(dir, query string) string {
	u := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	if query != "" {
		u += "?" + query
	}
	return u
}

func testEnv(t *testing.T) stream.SourceEnv {
	fs := vfs.NewMem()
	_ = fs.MkdirAll("/ckpt/sources/t", 0o755)
	return stream.SourceEnv{Name: "t", FS: fs, MetadataDir: "/ckpt/sources/t"}
}

func rowString(b *stream.Batch, i int) string {
	var parts []string
	for _, c := range b.Columns {
		if c.IsNull(i) {
			parts = append(parts, "null")
			continue
		}
		switch c.Type.Kind() {
		case stream.Int64, stream.Int32, stream.Int16, stream.Int8:
			parts = append(parts, strconv.FormatInt(c.Int64s[i], 10))
		case stream.Boolean:
			parts = append(parts, strconv.FormatBool(c.Int64s[i] != 0))
		case stream.Date:
			parts = append(parts, time.Unix(c.Int64s[i]*86400, 0).UTC().Format(time.DateOnly))
		case stream.Decimal:
			parts = append(parts, c.Decimals[i].Text(c.Type.Scale()))
		case stream.Float64, stream.Float32:
			parts = append(parts, strconv.FormatFloat(c.Float64s[i], 'g', -1, 64))
		case stream.String, stream.Binary:
			parts = append(parts, c.Strings[i])
		case stream.Timestamp, stream.TimestampNTZ:
			parts = append(parts, time.UnixMicro(c.Int64s[i]).UTC().Format(time.RFC3339Nano))
		case stream.Array:
			elems := &stream.Batch{Len: c.Elems.Len(), Columns: []stream.Column{*c.Elems}}
			var es []string
			for e := c.Offsets[i]; e < c.Offsets[i+1]; e++ {
				es = append(es, rowString(elems, int(e)))
			}
			parts = append(parts, "["+strings.Join(es, ",")+"]")
		default:
			panic(fmt.Sprintf("rowString: column %s of type %v", c.Name, c.Type))
		}
	}
	return strings.Join(parts, "|")
}

type batchOut struct {
	end  string
	rows []string
}

// drain runs triggers until no new data, returning each batch's end
// offset and rows; the first error is returned with what came before.
func drain(t *testing.T, s *Source, start stream.Offset) ([]batchOut, stream.Offset, error) {
	t.Helper()
	var out []batchOut
	for {
		end, err := s.LatestOffset(t.Context(), start)
		if err != nil {
			return out, start, err
		}
		if string(end) == string(start) {
			return out, start, nil
		}
		var rows []string
		if err := s.ReadBatch(t.Context(), start, end, func(b *stream.Batch) error {
			if err := b.Validate(); err != nil {
				return err
			}
			for i := 0; i < b.Len; i++ {
				rows = append(rows, rowString(b, i))
			}
			return nil
		}); err != nil {
			return out, start, err
		}
		out = append(out, batchOut{string(end), rows})
		start = end
	}
}

func allRows(bs []batchOut) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.rows...)
	}
	slices.Sort(out)
	return out
}

// oracleRows renders the rows of the table at version v with package
// delta's generic row reader (parquet-go's row reconstruction, not this
// package's column decoder), columns in schema order.
func oracleRows(t *testing.T, dir string, v int64, cols []string) []string {
	t.Helper()
	tb, err := delta.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tb.Snapshot(t.Context(), v)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := snap.Rows(t.Context(), func(row map[string]any) error {
		var parts []string
		for _, c := range cols {
			switch x := row[c].(type) {
			case nil:
				parts = append(parts, "null")
			case time.Time:
				parts = append(parts, x.UTC().Format(time.RFC3339Nano))
			case float64:
				parts = append(parts, strconv.FormatFloat(x, 'g', -1, 64))
			case float32:
				parts = append(parts, strconv.FormatFloat(float64(x), 'g', -1, 64))
			default:
				parts = append(parts, fmt.Sprint(x))
			}
		}
		out = append(out, strings.Join(parts, "|"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// schemaCols is the names of s's columns, in order.
func schemaCols(s *Source) []string {
	var out []string
	for _, f := range s.Schema().Fields {
		out = append(out, f.Name)
	}
	return out
}

// TestGoldenSnapshots reads the initial snapshot of tables written by
// Spark and Databricks (JSON commits, Parquet checkpoints, partition
// values with '/' and spaces, integer partitions) one file per trigger,
// and checks the rows against package delta's row reader and the offsets
// against Delta's sequence: (V, i, true) per file, then (V+1, -1, false).
func TestGoldenSnapshots(t *testing.T) {
	for _, c := range []struct {
		name   string
		latest int64
	}{{"simple_table", 4}, {"basic-with-inserts-merge", 1}, {"basic-with-inserts-deletes-checkpoint", 13}, {"delta-0.2.0", 3},
		{"delta-0.8.0-special-partition", 0}, {"delta-2.2.0-partitioned-types", 0}} {
		t.Run(c.name, func(t *testing.T) {
			dir := golden(t, c.name)
			s, bs := openDrain(t, tableURI(dir, "maxFilesPerTrigger=1"))
			want := oracleRows(t, dir, -1, schemaCols(s))
			if got := allRows(bs); !slices.Equal(got, want) {
				t.Fatalf("rows\n%v\nwant\n%v", got, want)
			}
			for i, b := range bs {
				want := fmt.Sprintf(`"reservoirVersion":%d,"index":%d,"isStartingVersion":true}`, c.latest, i)
				if i == len(bs)-1 {
					want = fmt.Sprintf(`"reservoirVersion":%d,"index":-1,"isStartingVersion":false}`, c.latest+1)
				}
				if !strings.HasPrefix(b.end, `{"sourceVersion":1,"reservoirId":"`) || !strings.HasSuffix(b.end, want) {
					t.Fatalf("batch %d ends at %s, want ...%s", i, b.end, want)
				}
			}
		})
	}
}

// openDrain opens the source uri names and drains its batches.
func openDrain(t *testing.T, uri string) (*Source, []batchOut) {
	t.Helper()
	s, err := NewFromURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(t.Context(), testEnv(t)); err != nil {
		t.Fatal(err)
	}
	bs, _, err := drain(t, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, bs
}

// TestGoldenSnapshotsOneBatch reads each golden table's snapshot in one
// batch, so that its files decode into the value slices of the files
// before them (ReadBatch's pool): the rows must be the row reader's, in
// the same order, as when each file is a batch of its own.
func TestGoldenSnapshotsOneBatch(t *testing.T) {
	for _, name := range []string{"simple_table", "basic-with-inserts-merge", "basic-with-inserts-deletes-checkpoint", "delta-0.2.0",
		"delta-0.8.0-special-partition", "delta-2.2.0-partitioned-types"} {
		t.Run(name, func(t *testing.T) {
			dir := golden(t, name)
			for _, par := range []string{"parallelism=1", "parallelism=4"} {
				s, bs := openDrain(t, tableURI(dir, par))
				if len(bs) != 1 {
					t.Fatalf("%s: %d batches, want the snapshot in one", par, len(bs))
				}
				if got, want := allRows(bs), oracleRows(t, dir, -1, schemaCols(s)); !slices.Equal(got, want) {
					t.Fatalf("%s: rows\n%v\nwant\n%v", par, got, want)
				}
			}
		})
	}
}

// multisetMinus is a minus b, both sorted.
func multisetMinus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if i := slices.Index(b, x); i >= 0 {
			b = slices.Delete(slices.Clone(b), i, i+1)
			continue
		}
		out = append(out, x)
	}
	return out
}

// TestGoldenChangeCommits streams a Spark table with DELETE commits (that
// rewrite files) from version 0: refused without an option, as Delta
// refuses it (ignoreDeletes does not cover a rewrite), before any batch;
// with
// skipChangeCommits the rows are exactly those of the append-only commits
// (each one's rows: the table after it minus the table before it, by
// package delta's reader).
func TestGoldenChangeCommits(t *testing.T) {
	dir := golden(t, "basic-with-inserts-deletes-checkpoint")
	for _, q := range []string{"startingVersion=0", "startingVersion=0&ignoreDeletes=true"} {
		s, _ := NewFromURI(tableURI(dir, q))
		if err := s.Open(t.Context(), testEnv(t)); err != nil {
			t.Fatal(err)
		}
		bs, _, err := drain(t, s, nil)
		if errcode.Code(err) != CodeIgnoreChanges || !strings.Contains(err.Error(), "at version 5") {
			t.Fatalf("%s: %v", q, err)
		}
		if len(bs) != 0 { // the admission walks into version 5 before it can end a batch (as Delta's does)
			t.Fatalf("%s: before the refusal: %v", q, bs)
		}
	}
	tb, err := delta.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	prev := []string(nil)
	prevFiles := map[string]bool{}
	for v := int64(0); v <= 13; v++ {
		snap, err := tb.Snapshot(t.Context(), v)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]bool{}
		for _, f := range snap.Files() {
			files[f.Path] = true
		}
		appendOnly := true
		for p := range prevFiles {
			appendOnly = appendOnly && files[p]
		}
		rows := oracleRows(t, dir, v, []string{"id"})
		if appendOnly {
			want = append(want, multisetMinus(rows, prev)...)
		}
		prev, prevFiles = rows, files
	}
	slices.Sort(want)
	s, _ := NewFromURI(tableURI(dir, "startingVersion=0&skipChangeCommits=true&maxFilesPerTrigger=2"))
	if err := s.Open(t.Context(), testEnv(t)); err != nil {
		t.Fatal(err)
	}
	bs, end, err := drain(t, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := allRows(bs); !slices.Equal(got, want) || !strings.Contains(string(end), `"reservoirVersion":13,"index":-1`) /* version 13 deletes: skipped, no data past it */ {
		t.Fatalf("rows %v (end %s), want %v", got, end, want)
	}
}
