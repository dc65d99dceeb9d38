package s3archive

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
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
	manifests := map[string]*archivegen.Manifest{}
	for _, w := range windows {
		m, err := archivegen.Generate(t.Context(), archivegen.Options{
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

func checkChain(t *testing.T, rows []block, m *archivegen.Manifest) {
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

// TestChainAllColumns reads every block column of gen-archive files of each
// schema era and checks each against the chain's rules: nulls exactly where
// the fork makes them (base_fee_per_gas before block 12,965,000 and in files
// before London's, withdrawals_root before Shanghai's timestamp), hex widths,
// gas_used <= gas_limit, and total difficulty accumulating difficulty in
// double arithmetic, as the writer does.
func TestChainAllColumns(t *testing.T) {
	root := t.TempDir()
	windows := []struct {
		name  string
		first time.Time
		days  int
	}{
		{"prelondon", time.Date(2016, 3, 1, 0, 0, 0, 0, time.UTC), 1},
		{"london", time.Date(2021, 8, 5, 0, 0, 0, 0, time.UTC), 1},
		{"merge", time.Date(2022, 9, 15, 0, 0, 0, 0, time.UTC), 1},
		{"shanghai", time.Date(2023, 4, 12, 0, 0, 0, 0, time.UTC), 1},
	}
	hexCols := map[string]*regexp.Regexp{
		ethblock.ColNonce: hexN(8), ethblock.ColSha3Uncles: hexN(32), ethblock.ColLogsBloom: hexN(256),
		ethblock.ColTransactionsRoot: hexN(32), ethblock.ColStateRoot: hexN(32), ethblock.ColReceiptsRoot: hexN(32),
		ethblock.ColExtraData: regexp.MustCompile(`^0x([0-9a-f]{2}){0,32}$`),
	}
	for _, w := range windows {
		t.Run(w.name, func(t *testing.T) {
			out := filepath.Join(root, w.name)
			if _, err := archivegen.Generate(t.Context(), archivegen.Options{Out: out, Preset: chain.RangePreset(w.first, w.days), Seed: 1, Workers: 2}); err != nil {
				t.Fatal(err)
			}
			s := openSource(t, Options{URI: fileURI(filepath.Join(out, "v1.0/eth/blocks"))}, testEnv(t, vfs.NewMem()))
			rows := drainAll(t, s)
			if len(rows) == 0 {
				t.Fatal("no rows")
			}
			var prevTD float64
			nulls := map[string]int{}
			for i, r := range rows {
				where := fmt.Sprintf("block %v", r[ethblock.ColNumber])
				for _, c := range ethblock.Schema {
					if r[c.Name] == nil {
						nulls[c.Name]++
						if !c.Nullable {
							t.Fatalf("%s: %s is null", where, c.Name)
						}
					}
				}
				num := r[ethblock.ColNumber].(int64)
				ts := r[ethblock.ColBlockTS].(int64)
				if (r[ethblock.ColBaseFeePerGas] == nil) != (uint64(num) < chain.LondonBlock) {
					t.Fatalf("%s: base_fee_per_gas %v", where, r[ethblock.ColBaseFeePerGas])
				}
				if (r[ethblock.ColWithdrawalsRoot] == nil) != (ts < chain.ShanghaiTime.UnixMicro()) {
					t.Fatalf("%s: withdrawals_root %v", where, r[ethblock.ColWithdrawalsRoot])
				}
				for col, re := range hexCols {
					if v := r[col].(string); !re.MatchString(v) {
						t.Fatalf("%s: %s %q", where, col, v)
					}
				}
				if r[ethblock.ColGasUsed].(int64) > r[ethblock.ColGasLimit].(int64) || r[ethblock.ColSize].(int64) <= 0 {
					t.Fatalf("%s: gas_used %v > gas_limit %v or size %v", where, r[ethblock.ColGasUsed], r[ethblock.ColGasLimit], r[ethblock.ColSize])
				}
				diff, td := r[ethblock.ColDifficulty].(float64), r[ethblock.ColTotalDifficulty].(float64)
				if (diff == 0) != (uint64(num) >= chain.MergeBlock) {
					t.Fatalf("%s: difficulty %v", where, diff)
				}
				if i > 0 && td != prevTD+diff {
					t.Fatalf("%s: total_difficulty %v, previous %v + difficulty %v", where, td, prevTD, diff)
				}
				prevTD = td
			}
			t.Logf("%d rows, nulls %v", len(rows), nulls)
		})
	}
}

func hexN(bytes int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`^0x[0-9a-f]{%d}$`, 2*bytes))
}

// drainAll reads every admitted batch and returns its rows as column name
// -> value (int64, float64 or string; nil for a null).
func drainAll(t testing.TB, s *Source) []map[string]any {
	t.Helper()
	var start stream.Offset
	var rows []map[string]any
	for {
		end, err := s.LatestOffset(t.Context(), start)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(end, start) {
			return rows
		}
		err = s.ReadBatch(t.Context(), start, end, func(b *stream.Batch) error {
			if err := b.Validate(); err != nil {
				return err
			}
			for i := range b.Len {
				rows = append(rows, streamtest.Values(b, i))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		start = end
	}
}
