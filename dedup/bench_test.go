package dedup

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/stream"
)

// BenchmarkDedupNewKeys is the `dedup` bench shape's backfill without the
// engine: dropDuplicates(hash) over keys distinct 66-character block hashes
// in 200 state partitions, each batch holding perBatch hashes twice (the
// shape's two sources reading the same files), in chunks of 6,400 rows
// (one file of the seed archive), each batch committed through
// PrepareCommit and Commit. One op is the whole backfill from an empty
// checkpoint on the real disk. Run it alone (the machine is shared):
//
//	go test -run '^$' -bench DedupNewKeys -benchtime 1x ./dedup/
//
// ETHSTREAM_DEDUP_BENCH_KEYS sets keys (default 1,000,000) to look at how
// the cost per key grows with the state.
func BenchmarkDedupNewKeys(b *testing.B) {
	keys := 1_000_000
	if v := os.Getenv("ETHSTREAM_DEDUP_BENCH_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("ETHSTREAM_DEDUP_BENCH_KEYS=%q: want a positive count", v)
		}
		keys = n
	}
	const perBatch, chunk = 250_000, 6_400
	hashes := benchHashes(keys)
	schema := stream.Schema{Fields: []stream.Field{{Name: "hash", Type: stream.String}}}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		op, err := New(Spec{Input: schema, Columns: []string{"hash"}})
		if err != nil {
			b.Fatal(err)
		}
		env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state", "0"), FS: vfs.Default,
			LocalDir: filepath.Join(dir, "local"), Partitions: 200, Version: -1}
		if err := op.Open(ctx, env); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var emitted int
		for id := int64(0); int(id)*perBatch < keys; id++ {
			batch := hashes[int(id)*perBatch : min(int(id+1)*perBatch, keys)]
			rows := append(append(make([]string, 0, 2*len(batch)), batch...), batch...)
			for lo := 0; lo < len(rows); lo += chunk {
				part := rows[lo:min(lo+chunk, len(rows))]
				in := &stream.Batch{Len: len(part), Columns: []stream.Column{{Name: "hash", Type: stream.String, Strings: part}}}
				if err := op.Process(ctx, id, 0, in); err != nil {
					b.Fatal(err)
				}
			}
			out, _, err := op.Finish(ctx, id, 0)
			if err != nil {
				b.Fatal(err)
			}
			emitted += out.Len
			if err := op.PrepareCommit(ctx, id); err != nil {
				b.Fatal(err)
			}
			if err := op.Commit(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if emitted != keys {
			b.Fatalf("emitted %d rows, want %d", emitted, keys)
		}
		if err := op.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(keys)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}

// benchHashes returns n distinct block-hash-like strings: "0x" and 64 hex
// digits, uniformly random (a hash spreads over every partition and every
// key range, so no bound check can rule a new one out).
func benchHashes(n int) []string {
	r := rand.New(rand.NewPCG(43, 44))
	hs := make([]string, n)
	var raw [32]byte
	for i := range hs {
		for j := 0; j < len(raw); j += 8 {
			v := r.Uint64()
			for k := range 8 {
				raw[j+k] = byte(v >> (8 * k))
			}
		}
		hs[i] = "0x" + hex.EncodeToString(raw[:])
	}
	return hs
}
