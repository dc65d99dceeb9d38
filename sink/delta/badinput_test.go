package delta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/fixture"
	"github.com/ethstream/ethstream/stream"
)

func codeOf(err error) string {
	var e *errcode.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestBadInput(t *testing.T) {
	root := goldenDir(t)
	logf := func(dir string, v int) string {
		return filepath.Join(dir, "_delta_log", fmt.Sprintf("%020d.json", v))
	}
	cases := []struct {
		name     string
		table    string
		damage   func(t *testing.T, dir string) string // returns the path the error must name
		code     string
		atOpen   bool // error from Snapshot (else from Rows)
		readOnly bool
	}{
		{"corrupt commit json", "basic-with-inserts-merge", func(t *testing.T, dir string) string {
			p := logf(dir, 1)
			data, _ := os.ReadFile(p)
			os.WriteFile(p, data[:len(data)/2], 0o644)
			return p
		}, CodeCorruptLog, true, false},
		{"commit line not an object", "simple_table", func(t *testing.T, dir string) string {
			p := logf(dir, 2)
			os.WriteFile(p, []byte("[1,2]\n"), 0o644)
			return p
		}, CodeCorruptLog, true, false},
		{"version gap after checkpoint", "basic-with-inserts-deletes-checkpoint", func(t *testing.T, dir string) string {
			p := logf(dir, 12)
			os.Remove(p)
			return p
		}, CodeVersionGap, true, false},
		{"version gap without checkpoint", "simple_table", func(t *testing.T, dir string) string {
			p := logf(dir, 0)
			os.Remove(p)
			return p
		}, CodeVersionGap, true, false},
		{"corrupt checkpoint", "delta-0.2.0", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "_delta_log", "00000000000000000003.checkpoint.parquet")
			os.WriteFile(p, []byte("PAR1 not really"), 0o644)
			return p
		}, CodeCorruptLog, true, false},
		{"unknown reader feature", "basic-with-inserts-merge", func(t *testing.T, dir string) string {
			os.WriteFile(logf(dir, 2), []byte(`{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors"]}}`+"\n"), 0o644)
			return filepath.Join(dir, "_delta_log")
		}, CodeUnsupportedProtocol, true, false},
		{"reader version 2", "basic-with-inserts-merge", func(t *testing.T, dir string) string {
			os.WriteFile(logf(dir, 2), []byte(`{"protocol":{"minReaderVersion":2,"minWriterVersion":5}}`+"\n"), 0o644)
			return filepath.Join(dir, "_delta_log")
		}, CodeUnsupportedProtocol, true, false},
		{"missing data file", "basic-with-inserts-deletes-checkpoint", func(t *testing.T, dir string) string {
			tbl, _ := Open(context.Background(), dir)
			s, _ := tbl.Snapshot(context.Background(), -1)
			live := s.Files()
			p := filepath.Join(dir, live[len(live)-1].Path)
			os.Remove(p)
			return p
		}, CodeMissingFile, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyTable(t, filepath.Join(root, tc.table))
			want := tc.damage(t, dir)
			ctx := context.Background()
			tbl, err := Open(ctx, dir)
			if err == nil {
				var s *Snapshot
				s, err = tbl.Snapshot(ctx, -1)
				if err == nil {
					if tc.atOpen {
						t.Fatalf("snapshot succeeded, want %s", tc.code)
					}
					rows := 0
					err = s.Rows(ctx, func(map[string]any) error { rows++; return nil })
					if rows != 0 {
						t.Errorf("scan returned %d rows before failing: a partial table", rows)
					}
				}
			}
			if codeOf(err) != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want it to name %s", err, want)
			}
		})
	}
}

func TestWriterRefusesNewerWriterProtocol(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 0)
	if _, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m", 1)})); err != nil {
		t.Fatal(err)
	}
	// Another engine upgrades the writer protocol: we can still read, not write.
	os.WriteFile(filepath.Join(dir, "_delta_log", "00000000000000000002.json"), []byte(`{"protocol":{"minReaderVersion":1,"minWriterVersion":4}}`+"\n"), 0o644)
	if got := tableRows(t, dir, -1); len(got) != 1 {
		t.Fatalf("rows = %v", got)
	}
	_, err := s.AddBatch(ctx, 1, mkBatch([]refRow{row(0, "a", "m", 2)}))
	if codeOf(err) != CodeUnsupportedProtocol {
		t.Fatalf("err = %v", err)
	}
	s2, _ := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog})
	closeAtEnd(t, s2)
	if err := s2.Open(ctx, stream.SinkEnv{QueryID: "q"}); codeOf(err) != CodeUnsupportedProtocol {
		t.Fatalf("open err = %v", err)
	}
}

func TestCommitFileNamesOnly(t *testing.T) {
	// Files that merely look like commits are not versions.
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 0)
	if _, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m", 1)})); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "_delta_log")
	for _, name := range []string{"00000000000000000002.json.tmp", "2.json", "00000000000000000002.crc", "00000000000000000002.00000000000000000003.compacted.json", ".00000000000000000002.json.x.tmp"} {
		os.WriteFile(filepath.Join(log, name), []byte("garbage"), 0o644)
	}
	os.MkdirAll(filepath.Join(log, ".tmp"), 0o755)
	os.WriteFile(filepath.Join(log, ".tmp", "00000000000000000002.json"), []byte("garbage"), 0o644)
	tbl, _ := Open(ctx, dir)
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil || snap.Version != 1 {
		t.Fatalf("snapshot = %v, %v", snap, err)
	}
}

func FuzzParseActions(f *testing.F) {
	if root, ok := fixture.Find("delta-golden"); ok {
		matches, _ := filepath.Glob(filepath.Join(root, "*", "_delta_log", "*.json"))
		for _, m := range matches {
			if data, err := os.ReadFile(m); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(`{"add":{"path":"a%20b","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}` + "\n"))
	f.Add([]byte(`{"txn":{"appId":"q","version":3}}`))
	f.Add([]byte(`{"metaData":{"id":"x","format":{"provider":"parquet"},"schemaString":"{\"type\":\"struct\",\"fields\":[]}"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		acts, err := parseActions(data)
		if err != nil {
			return
		}
		// Whatever parses must re-encode and parse to the same actions.
		body, err := marshalActions(acts)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := parseActions(body)
		if err != nil {
			t.Fatalf("re-parse %q: %v", body, err)
		}
		if len(again) != len(acts) {
			t.Fatalf("re-parse gave %d actions, want %d", len(again), len(acts))
		}
		s := newSnapshot(newTable(vfs.Default, "/nonexistent"))
		s.applyAll(acts)
	})
}

func readFileBytes(p string) ([]byte, error) { return os.ReadFile(p) }
