package archivegen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/errcode"
	"github.com/parquet-go/parquet-go"
)

func genSmall(t testing.TB, p chain.Preset, seed int64) (string, *Manifest) {
	t.Helper()
	dir := t.TempDir()
	m, err := Generate(context.Background(), Options{Out: dir, Preset: p, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// readRow is what a reader of any era decodes: optional columns as pointers.
type readRow struct {
	Timestamp        time.Time `parquet:"timestamp,timestamp(microsecond)"`
	Number           int64     `parquet:"number"`
	Hash             string    `parquet:"hash"`
	ParentHash       string    `parquet:"parent_hash"`
	Miner            string    `parquet:"miner"`
	TransactionCount int64     `parquet:"transaction_count"`
	GasUsed          int64     `parquet:"gas_used"`
	GasLimit         int64     `parquet:"gas_limit"`
	LogsBloom        string    `parquet:"logs_bloom"`
	Difficulty       float64   `parquet:"difficulty"`
	TotalDifficulty  float64   `parquet:"total_difficulty"`
	BaseFeePerGas    *int64    `parquet:"base_fee_per_gas,optional"`
	WithdrawalsRoot  *string   `parquet:"withdrawals_root,optional"`
}

type readFile struct {
	columns   map[string]bool
	rowGroups int
	rows      []readRow
}

func readArchiveFile(t *testing.T, path string) readFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	out := readFile{columns: map[string]bool{}, rowGroups: len(pf.RowGroups())}
	for _, c := range pf.Schema().Columns() {
		out.columns[c[0]] = true
	}
	// Readers match columns by name: convert the file's schema to ours.
	r := parquet.NewGenericReader[readRow](f)
	defer r.Close()
	out.rows = make([]readRow, pf.NumRows())
	n, err := r.Read(out.rows)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	out.rows = out.rows[:n]
	return out
}

// checkArchive verifies an archive against its manifest: layout, row
// counts, contiguous numbers, a hash chain across files from
// FirstParentHash to LastHash, and the per-era schema.
func checkArchive(t *testing.T, dir string, m *Manifest) []readRow {
	t.Helper()
	var all []readRow
	parent := m.FirstParentHash
	next := int64(m.FirstBlock)
	for _, mf := range m.Files {
		if !strings.HasPrefix(mf.Key, "v1.0/eth/blocks/date="+mf.Date+"/part-00000-") || !strings.HasSuffix(mf.Key, "-c000.snappy.parquet") {
			t.Fatalf("bad key %s", mf.Key)
		}
		st, err := os.Stat(filepath.Join(dir, mf.Key))
		if err != nil || st.Size() != mf.Bytes {
			t.Fatalf("%s: %v size mismatch", mf.Key, err)
		}
		rf := readArchiveFile(t, filepath.Join(dir, mf.Key))
		if int64(len(rf.rows)) != mf.Rows || rf.rowGroups != 2 {
			t.Fatalf("%s: %d rows in %d row groups, manifest %d", mf.Key, len(rf.rows), rf.rowGroups, mf.Rows)
		}
		hasLondon, hasShanghai := false, false
		for _, r := range rf.rows {
			if r.Number != next || r.ParentHash != parent {
				t.Fatalf("%s: block %d parent %s, want block %d parent %s", mf.Key, r.Number, r.ParentHash, next, parent)
			}
			if r.Timestamp.Format(time.DateOnly) != mf.Date {
				t.Fatalf("block %d at %s in partition %s", r.Number, r.Timestamp, mf.Date)
			}
			if len(r.Miner) != 42 || r.Miner != strings.ToLower(r.Miner) || !common.IsHexAddress(r.Miner) {
				t.Fatalf("miner %q", r.Miner)
			}
			if (r.BaseFeePerGas != nil) != (uint64(r.Number) >= chain.LondonBlock) {
				t.Fatalf("block %d: base fee %v", r.Number, r.BaseFeePerGas)
			}
			if (r.WithdrawalsRoot != nil) != !r.Timestamp.Before(chain.ShanghaiTime) {
				t.Fatalf("block %d: withdrawals root %v", r.Number, r.WithdrawalsRoot)
			}
			if (r.Difficulty == 0) != (uint64(r.Number) >= chain.MergeBlock) {
				t.Fatalf("block %d: difficulty %v", r.Number, r.Difficulty)
			}
			if r.GasUsed > r.GasLimit || (r.GasUsed == 0) != (r.TransactionCount == 0) || len(r.LogsBloom) != 514 {
				t.Fatalf("block %d: gas %d/%d txs %d", r.Number, r.GasUsed, r.GasLimit, r.TransactionCount)
			}
			hasLondon = hasLondon || uint64(r.Number) >= chain.LondonBlock
			hasShanghai = hasShanghai || !r.Timestamp.Before(chain.ShanghaiTime)
			parent = r.Hash
			next++
		}
		// The schema drifts by file: columns appear with their fork.
		if rf.columns["base_fee_per_gas"] != hasLondon || rf.columns["withdrawals_root"] != hasShanghai {
			t.Fatalf("%s: columns %v (london %v shanghai %v)", mf.Key, rf.columns, hasLondon, hasShanghai)
		}
		all = append(all, rf.rows...)
	}
	if parent != m.LastHash || uint64(next-1) != m.LastBlock || int64(len(all)) != m.Rows {
		t.Fatalf("archive ends at %d %s, manifest %d %s", next-1, parent, m.LastBlock, m.LastHash)
	}
	return all
}

func TestArchiveSchemaPerEra(t *testing.T) {
	for _, c := range []struct {
		name  string
		p     chain.Preset
		first uint64
	}{
		{"genesis", chain.RangePreset(chain.FirstDay, 1), 1},
		{"london", chain.RangePreset(time.Date(2021, 8, 4, 0, 0, 0, 0, time.UTC), 2), 0},
		{"shanghai", chain.RangePreset(time.Date(2023, 4, 12, 0, 0, 0, 0, time.UTC), 2), 0},
		{"end", chain.LastDaysPreset(1), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, m := genSmall(t, c.p, 3)
			if m.FirstBlock != c.p.FirstBlock || m.LastBlock != c.p.LastBlock || len(m.Files) != c.p.Days {
				t.Fatalf("manifest %d..%d (%d files), preset %+v", m.FirstBlock, m.LastBlock, len(m.Files), c.p)
			}
			if c.first != 0 && m.FirstBlock != c.first {
				t.Fatalf("first block %d", m.FirstBlock)
			}
			rows := checkArchive(t, dir, m)
			if m2, err := ReadManifest(dir); err != nil || m2.LastHash != m.LastHash {
				t.Fatalf("read manifest back: %v", err)
			}
			if c.name == "genesis" && rows[0].Timestamp.Unix() != chain.GenesisTime.Unix()+15 {
				t.Fatalf("block 1 at %s", rows[0].Timestamp)
			}
		})
	}
}

// TestArchiveHashesAreHeaderHashes rebuilds the headers of a day and checks
// that the archive's hash column is go-ethereum's Header.Hash of them.
func TestArchiveHashesAreHeaderHashes(t *testing.T) {
	p := chain.RangePreset(time.Date(2022, 9, 15, 0, 0, 0, 0, time.UTC), 1) // the merge day: PoW and PoS blocks
	dir, m := genSmall(t, p, 5)
	rows := checkArchive(t, dir, m)
	db := chain.BuildDay(5, p.DayIndex())
	db.LinkTo(chain.Anchor(5, p.FirstBlock))
	for i, h := range db.Headers {
		if h.Hash().Hex() != rows[i].Hash || h.ParentHash.Hex() != rows[i].ParentHash {
			t.Fatalf("block %d: header hash %s, archive %s", h.Number, h.Hash().Hex(), rows[i].Hash)
		}
	}
	if m.LastHeader.Hash().Hex() != m.LastHash {
		t.Fatal("manifest last header does not hash to last hash")
	}
}

func dirBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if !de.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(dir, p)
			out[rel] = b
		}
		return nil
	})
	return out
}

func TestArchiveDeterministic(t *testing.T) {
	p := chain.LastDaysPreset(2)
	a := t.TempDir()
	b := t.TempDir()
	if _, err := Generate(context.Background(), Options{Out: a, Preset: p, Seed: 9, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(context.Background(), Options{Out: b, Preset: p, Seed: 9, Workers: 3}); err != nil {
		t.Fatal(err)
	}
	fa, fb := dirBytes(t, a), dirBytes(t, b)
	if len(fa) != 3 || len(fa) != len(fb) {
		t.Fatalf("%d vs %d files", len(fa), len(fb))
	}
	for k, v := range fa {
		if !bytes.Equal(v, fb[k]) {
			t.Fatalf("%s differs between runs", k)
		}
	}
	// Regenerating in place is allowed and byte-identical.
	if _, err := Generate(context.Background(), Options{Out: a, Preset: p, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	for k, v := range dirBytes(t, a) {
		if !bytes.Equal(v, fb[k]) {
			t.Fatalf("%s differs after regeneration", k)
		}
	}
	// Another seed: same blocks numbers and layout, other hashes.
	_, m2 := genSmall(t, p, 10)
	m1, _ := ReadManifest(a)
	if m2.LastBlock != m1.LastBlock || m2.Rows != m1.Rows || m2.LastHash == m1.LastHash {
		t.Fatalf("seed 10 vs 9: %d/%d rows, hashes %s %s", m2.Rows, m1.Rows, m2.LastHash, m1.LastHash)
	}
}

func TestArchiveBadOutput(t *testing.T) {
	p := chain.LastDaysPreset(1)
	// Output path is a file.
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	_, err := Generate(context.Background(), Options{Out: f, Preset: p, Seed: 1})
	if errcode.Code(err) != CodeOutputUnwritable {
		t.Fatalf("file as out: %v", err)
	}
	// Read-only directory (skipped as root, which can write anywhere).
	if os.Geteuid() != 0 {
		ro := t.TempDir()
		os.Chmod(ro, 0o555)
		_, err = Generate(context.Background(), Options{Out: ro, Preset: p, Seed: 1})
		if errcode.Code(err) != CodeOutputUnwritable {
			t.Fatalf("read-only out: %v", err)
		}
	}
	// Another preset's archive: refused, nothing touched.
	dir, m := genSmall(t, p, 1)
	before := dirBytes(t, dir)
	_, err = Generate(context.Background(), Options{Out: dir, Preset: p, Seed: 2})
	if errcode.Code(err) != CodeOutputNotEmpty || !strings.Contains(err.Error(), fmt.Sprintf("it holds the archive of preset %s, seed 1: 1 day from %s, this generation is 1 day from %s, seed 2", m.Preset, m.FirstDay, m.FirstDay)) {
		t.Fatalf("foreign archive: %v", err)
	}
	// The same preset and seed, fewer days (gen-archive --days 1 over a
	// 2-day archive): the message says the days differ, not the seed.
	two, m2 := genSmall(t, chain.LastDaysPreset(2), 1)
	_, err = Generate(context.Background(), Options{Out: two, Preset: p, Seed: 1})
	if errcode.Code(err) != CodeOutputNotEmpty || !strings.Contains(err.Error(), fmt.Sprintf("seed 1: 2 days from %s, this generation is 1 day from %s (path:", m2.FirstDay, m.FirstDay)) ||
		!strings.Contains(err.Error(), "To fix: generate into another --out directory") {
		t.Fatalf("fewer days: %v", err)
	}
	after := dirBytes(t, dir)
	if len(after) != len(before) {
		t.Fatalf("refused generation changed the directory: %d -> %d files", len(before), len(after))
	}
	// Stale temp files of a crashed run are removed by the next run.
	stale := filepath.Join(dir, filepath.Dir(m.Files[0].Key), ".part-crashed.parquet.tmp")
	os.WriteFile(stale, []byte("partial"), 0o644)
	if _, err := Generate(context.Background(), Options{Out: dir, Preset: p, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("stale temp file survived")
	}
}

func TestArchiveCancelLeavesNoManifest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	n := 0
	_, err := Generate(ctx, Options{Out: dir, Preset: chain.LastDaysPreset(6), Seed: 1, Workers: 1,
		Progress: func(done, total int) {
			n = done
			if done == 2 {
				cancel()
			}
		}})
	if err == nil {
		t.Fatalf("cancelled generation succeeded after %d files", n)
	}
	if _, err := ReadManifest(dir); errcode.Code(err) != CodeArchiveNotFound {
		t.Fatalf("manifest after cancel: %v", err)
	}
	for k := range dirBytes(t, dir) {
		if strings.HasSuffix(k, ".tmp") {
			t.Fatalf("temp file left: %s", k)
		}
	}
}

func TestReadManifestErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadManifest(dir); errcode.Code(err) != CodeArchiveNotFound || !strings.Contains(err.Error(), "gen-archive") {
		t.Fatalf("missing: %v", err)
	}
	_, m := genSmall(t, chain.LastDaysPreset(1), 11)
	good, _ := json.Marshal(m)
	for name, body := range map[string]string{
		"truncated":    string(good[:len(good)/2]),
		"future":       strings.Replace(string(good), `"version":1`, `"version":2`, 1),
		"no version":   strings.Replace(string(good), `"version":1,`, ``, 1),
		"bad rows":     strings.Replace(string(good), `"rows":`, `"rows":1`, 1),
		"bad lasthash": strings.Replace(string(good), m.LastHash, "0x"+strings.Repeat("ab", 32), 1),
		"empty":        "",
	} {
		os.WriteFile(filepath.Join(dir, ManifestName), []byte(body), 0o644)
		_, err := ReadManifest(dir)
		if errcode.Code(err) != CodeManifestCorrupt || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v", name, err)
		}
	}
	os.WriteFile(filepath.Join(dir, ManifestName), good, 0o644)
	if _, err := ReadManifest(dir); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"firstBlock":1,"lastBlock":1,"rows":1,"files":[{"key":"../x","firstBlock":1,"lastBlock":1,"rows":1}]}`))
	f.Add([]byte(`{"version":2}`))
	// A valid manifest, so the fuzzer starts from the accepting path.
	db := chain.BuildDay(1, chain.TotalDays-1)
	last := db.LinkTo(chain.Anchor(1, db.FirstBlock()))
	h := db.Headers[len(db.Headers)-1]
	valid, err := json.Marshal(&Manifest{
		Version: 1, Preset: "last-1", Seed: 1, FirstDay: "2026-09-29", Days: 1,
		FirstBlock: db.FirstBlock(), LastBlock: h.Number.Uint64(), FirstParentHash: chain.Anchor(1, db.FirstBlock()).Hex(),
		LastHash: last.Hex(), LastTimestamp: int64(h.Time), Rows: int64(len(db.Headers)),
		Files:      []ManifestFile{{Key: "v1.0/eth/blocks/date=2026-09-29/part-0.parquet", Date: "2026-09-29", Rows: int64(len(db.Headers)), FirstBlock: db.FirstBlock(), LastBlock: h.Number.Uint64()}},
		LastHeader: h,
	})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := parseManifest(valid); err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseManifest(b)
		if err != nil {
			return
		}
		// Anything accepted is internally consistent.
		if m.LastHeader.Hash().Hex() != m.LastHash || m.Rows != int64(m.LastBlock-m.FirstBlock+1) {
			t.Fatalf("accepted inconsistent manifest %s", b)
		}
		for _, mf := range m.Files {
			if !filepath.IsLocal(filepath.FromSlash(mf.Key)) {
				t.Fatalf("accepted escaping key %q", mf.Key)
			}
		}
	})
}

// TestWriteManifestRefusesInvalid: a manifest no reader accepts is an
// INTERNAL_ERROR before anything is written (it panicked before).
func TestWriteManifestRefusesInvalid(t *testing.T) {
	dir := t.TempDir()
	err := WriteManifest(dir, &Manifest{})
	if errcode.Code(err) != errcode.Internal {
		t.Fatalf("got %v, want %s", err, errcode.Internal)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); !os.IsNotExist(err) {
		t.Fatalf("a manifest was written: %v", err)
	}
}
