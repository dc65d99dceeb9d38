package s3archive

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/chain"
)

// TestChainEras reads gen-archive files of every schema era (pre-London,
// the London fork day, Shanghai, late 2026) through the embedded S3 endpoint
// with throttling and 5xx injected, and from file://, and checks them
// against the manifest: every block once, consecutive numbers, a hash chain
// from the manifest's first parent hash to its last hash.
func TestChainEras(t *testing.T) {
	root := t.TempDir()
	windows := []struct {
		bucket string
		first  time.Time
		days   int
	}{
		{"prelondon", time.Date(2016, 3, 1, 0, 0, 0, 0, time.UTC), 1},
		{"london", time.Date(2021, 8, 4, 0, 0, 0, 0, time.UTC), 2},
		{"shanghai", time.Date(2023, 4, 12, 0, 0, 0, 0, time.UTC), 1},
		{"late", time.Date(2026, 9, 28, 0, 0, 0, 0, time.UTC), 1},
	}
	manifests := map[string]*chain.Manifest{}
	for _, w := range windows {
		m, err := chain.GenerateArchive(t.Context(), chain.GenOptions{
			Out: filepath.Join(root, w.bucket), Preset: chain.RangePreset(w.first, w.days), Seed: 1, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		manifests[w.bucket] = m
	}
	f := startFakeS3(t, root)
	f.setFaults(0.1, 0.05)
	for _, w := range windows {
		m := manifests[w.bucket]
		for _, via := range []string{"s3", "file"} {
			t.Run(w.bucket+"/"+via, func(t *testing.T) {
				o := s3Opts(f, "s3://"+w.bucket+"/v1.0/eth/blocks")
				if via == "file" {
					o = Options{URI: fileURI(filepath.Join(root, w.bucket, "v1.0/eth/blocks"))}
				}
				o.MaxFilesPerTrigger = 1
				s := openSource(t, o, testEnv(t, vfs.NewMem()))
				rows, batches := drain(t, s)
				if batches != len(m.Files) || int64(len(rows)) != m.Rows {
					t.Fatalf("%d batches, %d rows; manifest has %d files, %d rows", batches, len(rows), len(m.Files), m.Rows)
				}
				checkChain(t, rows, m)
			})
		}
	}
}

var (
	hexHash = regexp.MustCompile(`^0x[0-9a-f]{64}$`)
	hexAddr = regexp.MustCompile(`^0x[0-9a-f]{40}$`)
)

func checkChain(t *testing.T, rows []block, m *chain.Manifest) {
	t.Helper()
	if rows[0].ParentHash != m.FirstParentHash || rows[len(rows)-1].Hash != m.LastHash {
		t.Fatalf("chain ends %s..%s, manifest %s..%s", rows[0].ParentHash, rows[len(rows)-1].Hash, m.FirstParentHash, m.LastHash)
	}
	if rows[len(rows)-1].TS != m.LastTimestamp*1e6 {
		t.Fatalf("last block_ts %d, manifest %d s", rows[len(rows)-1].TS, m.LastTimestamp)
	}
	for i, r := range rows {
		where := fmt.Sprintf("row %d (block %d)", i, r.Number)
		if r.Number != int64(m.FirstBlock)+int64(i) {
			t.Fatalf("%s: want block %d", where, int64(m.FirstBlock)+int64(i))
		}
		if i > 0 && (r.ParentHash != rows[i-1].Hash || r.TS < rows[i-1].TS) {
			t.Fatalf("%s: parent %s after hash %s, ts %d after %d", where, r.ParentHash, rows[i-1].Hash, r.TS, rows[i-1].TS)
		}
		if !hexHash.MatchString(r.Hash) || !hexAddr.MatchString(r.Miner) || r.TxNull || r.GasNull {
			t.Fatalf("%s: malformed %+v", where, r)
		}
	}
}
