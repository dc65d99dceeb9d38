package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/google/uuid"
)

// TestGoldenAppendAndCheckpoint extends a copy of every golden table with a
// plain append commit (a copy of its largest live file, as a WRITE), then
// writes our own checkpoint of the foreign table, and checks that both
// replays (checkpoint + tail, JSON only) give the expected rows.
func TestGoldenAppendAndCheckpoint(t *testing.T) {
	root := goldenDir(t)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := copyTable(t, filepath.Join(root, tc.name))
			tbl, err := Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			s, err := tbl.Snapshot(ctx, -1)
			if err != nil {
				t.Fatal(err)
			}
			// Pick the live file with the most rows.
			var best AddFile
			bestRows := -1
			for _, f := range s.Files() {
				n := 0
				if err := readGenericRows(vfs.Default, tbl.filePath(f.Path), func(map[string]any) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
				if n > bestRows {
					best, bestRows = f, n
				}
			}
			data, err := readFileBytes(tbl.filePath(best.Path))
			if err != nil {
				t.Fatal(err)
			}
			dirPart := path.Dir(best.Path) // still URI-encoded, as in the log
			name := "part-00000-" + uuid.NewString() + "-c000.snappy.parquet"
			newPath := name
			if dirPart != "." {
				newPath = dirPart + "/" + name
			}
			if _, err := durable.Bytes(durable.Local{FS: vfs.Default}, filepath.Dir(tbl.filePath(newPath)), filepath.Base(tbl.filePath(newPath)), durable.Options{}, data); err != nil {
				t.Fatal(err)
			}
			add := best
			add.Path = newPath
			add.DataChange = true
			add.ModificationTime = time.Now().UnixMilli()
			blind := true
			rv := s.Version
			acts := []action{
				{CommitInfo: &CommitInfo{Timestamp: time.Now().UnixMilli(), Operation: "WRITE",
					OperationParameters: map[string]any{"mode": "Append", "partitionBy": "[]"},
					ReadVersion:         &rv, IsolationLevel: "Serializable", IsBlindAppend: &blind, EngineInfo: engineInfo()}},
				{Add: &add},
			}
			if err := s.commitActions(acts); err != nil {
				t.Fatal(err)
			}
			if err := s.writeCheckpoint(time.Now()); err != nil {
				t.Fatal(err)
			}
			want := tc.rows + bestRows
			for _, jsonOnly := range []bool{false, true} {
				l, err := tbl.list()
				if err != nil {
					t.Fatal(err)
				}
				if jsonOnly {
					l.checkpoints = nil
				}
				got, err := tbl.replay(ctx, l, s.Version)
				if err != nil {
					t.Fatalf("jsonOnly=%v: %v", jsonOnly, err)
				}
				if got.Version != tc.version+1 || len(got.Files()) != tc.liveFiles+1 {
					t.Fatalf("jsonOnly=%v: version %d files %d", jsonOnly, got.Version, len(got.Files()))
				}
				if rows := collectRows(t, got); len(rows) != want {
					t.Fatalf("jsonOnly=%v: %d rows, want %d", jsonOnly, len(rows), want)
				}
				if !bytes.Equal(mustJSON(t, got.txns), mustJSON(t, s.txns)) {
					t.Errorf("jsonOnly=%v: txns %v, want %v", jsonOnly, got.txns, s.txns)
				}
				if got.Metadata.SchemaString != s.Metadata.SchemaString || strings.Join(got.Metadata.PartitionColumns, ",") != strings.Join(s.Metadata.PartitionColumns, ",") {
					t.Errorf("jsonOnly=%v: metadata differs", jsonOnly)
				}
			}
			// Stats survive our checkpoint (including stats_parsed turned into JSON).
			l, _ := tbl.list()
			cp, err := tbl.replay(ctx, l, s.Version)
			if err != nil {
				t.Fatal(err)
			}
			if n1, ok1 := cp.NumRecords(); ok1 {
				if n2, ok2 := s.NumRecords(); !ok2 || n1 != n2 || n1 != int64(want) {
					t.Errorf("numRecords via checkpoint %d, in memory %d, want %d", n1, n2, want)
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
