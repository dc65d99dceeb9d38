package dedup

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// TestAbsentFilterExact: every added key is reported possibly present and
// every other key absent (64-bit hashes: a collision among these keys has
// a probability of about 2^-34), through the shards' growth from empty;
// a set not built from the state rules nothing out.
func TestAbsentFilterExact(t *testing.T) {
	var f absentFilter
	f.reset(true)
	keys := benchHashes(200_000)
	in, out := keys[:100_000], keys[100_000:]
	for i, k := range in {
		f.add(f.hash([]byte(k)))
		if i%1000 == 0 { // an abort's re-run adds keys held already
			f.add(f.hash([]byte(in[i/2])))
		}
	}
	if f.n != int64(len(in)) {
		t.Fatalf("the set holds %d hashes, want %d", f.n, len(in))
	}
	for _, k := range in {
		if f.absent(f.hash([]byte(k))) {
			t.Fatalf("added key %s reported absent", k)
		}
	}
	for _, k := range out {
		if !f.absent(f.hash([]byte(k))) {
			t.Fatalf("key %s never added reported possibly present", k)
		}
	}
	var invalid absentFilter
	invalid.reset(false)
	if invalid.absent(invalid.hash([]byte(in[0]))) || invalid.absent(invalid.hash([]byte("never added"))) {
		t.Fatal("a set not built from the state ruled a key out")
	}
}

// TestAbsentFilterStaysUseful: on a store that started empty the filter
// rules out new keys without lookups as the state grows past its initial
// capacity (it is rebuilt larger), and after a restart on a non-empty
// state it is built once the lookups would have paid for the scan.
func TestAbsentFilterStaysUseful(t *testing.T) {
	defer func(n int64) { initialKeys = n }(initialKeys)
	initialKeys = 64
	ctx := context.Background()
	dir := t.TempDir()
	schema := stream.Schema{Fields: []stream.Field{{Name: "hash", Type: stream.String}}}
	keys := benchHashes(6000)
	open := func(version int64) *Operator {
		op, err := New(Spec{Input: schema, Columns: []string{"hash"}})
		if err != nil {
			t.Fatal(err)
		}
		env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state", "0"), FS: vfs.Default,
			LocalDir: filepath.Join(dir, "local"), Partitions: 4, Version: version}
		if err := op.Open(ctx, env); err != nil {
			t.Fatal(err)
		}
		return op
	}
	run := func(op *Operator, id int64, ks []string) {
		in := &stream.Batch{Len: len(ks), Columns: []stream.Column{{Name: "hash", Type: stream.String, Strings: ks}}}
		streamtest.RunBatch(t, op, id, 0, in)
	}
	// ruledOut counts how many of ks the operator's filter rules out.
	ruledOut := func(op *Operator, ks []string) int {
		n := 0
		for _, k := range ks {
			if op.absent.absent(op.absent.hash(encodeStringKey(k))) {
				n++
			}
		}
		return n
	}
	op := open(-1)
	run(op, 0, keys[:2000])
	run(op, 1, keys[2000:4000])
	if !op.absent.valid || op.absent.n != 4000 {
		t.Fatalf("after 4000 keys from an empty store: filter valid %v, %d hashes", op.absent.valid, op.absent.n)
	}
	if n := ruledOut(op, keys[4000:]); n != 2000 {
		t.Fatalf("the filter rules out %d of 2000 new keys, want all", n)
	}
	if n := ruledOut(op, keys[:4000]); n != 0 {
		t.Fatalf("the filter rules out %d keys in state", n)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	op = open(1)
	defer op.Close()
	if op.absent.valid {
		t.Fatal("a filter valid on a store opened with keys, before any scan")
	}
	// 4000 keys in state: the filter is built after 500 lookups.
	run(op, 2, keys[4000:4600])
	if !op.absent.valid {
		t.Fatalf("filter not built after 600 lookups on 4000 keys (debt %d)", op.absent.debt)
	}
	if n := ruledOut(op, keys[4600:]); n != 1400 {
		t.Fatalf("after the restart the filter rules out %d of 1400 new keys, want all", n)
	}
	if n := ruledOut(op, keys[:4600]); n != 0 {
		t.Fatalf("the filter rules out %d keys in state", n)
	}
}

// encodeStringKey is the state key of a one-String-column deduplication.
func encodeStringKey(k string) []byte {
	op := &Operator{p: &plan{cols: []string{"hash"}}}
	b, _ := op.appendKey(nil, []*stream.Column{{Type: stream.String, Strings: []string{k}}}, 0)
	return b
}

// TestDedupAgainstOracle runs random batches (duplicates within and across
// batches, late rows, restarts at the last committed version, aborted
// batches re-run, the filter grown past a tiny initial capacity) through
// dropDuplicates and dropDuplicatesWithinWatermark and compares every
// batch's output with a brute-force oracle: a Go map of the keys in state
// (with their expiry), updated row by row by Spark's rules.
func TestDedupAgainstOracle(t *testing.T) {
	defer func(n int64, w int) { initialKeys, probeWindow = n, w }(initialKeys, probeWindow)
	initialKeys = 8
	// Windows of 7 rows: the engine's 50-row chunks below span several,
	// with duplicates within a window and across windows.
	probeWindow = 7
	for _, within := range []bool{false, true} {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("within=%v/seed=%d", within, seed), func(t *testing.T) {
				oracleRun(t, within, seed)
			})
		}
	}
}

func oracleRun(t *testing.T, within bool, seed uint64) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 7))
	const delay = 10 * time.Second
	spec := Spec{Input: input, Columns: []string{"k"}}
	if within {
		spec.WatermarkColumn, spec.WatermarkDelay, spec.WithinWatermark = "ts", delay, true
	}
	dir := t.TempDir()
	open := func(version int64) *Operator {
		op, err := New(spec)
		if err != nil {
			t.Fatal(err)
		}
		env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state", "0"), FS: vfs.Default,
			LocalDir: filepath.Join(dir, "local"), Partitions: 3, Version: version}
		if err := op.Open(ctx, env); err != nil {
			t.Fatal(err)
		}
		return op
	}
	// seen is the oracle's state: key -> expiry (µs; unused without a watermark).
	seen := map[string]int64{}
	committed := int64(-1)
	op := open(committed)
	defer func() { op.Close() }()
	var wmMs int64 // the watermark of the last committed batch
	universe := 40 + r.IntN(400)
	for id := int64(0); id < 30; id++ {
		// A batch of rows over a universe of keys, event times around a
		// clock moving forward one second a batch.
		n := r.IntN(300)
		ks, ts := make([]string, n), make([]int64, n)
		for i := range ks {
			ks[i] = fmt.Sprintf("k%d", r.IntN(universe))
			ts[i] = (id*1000 + int64(r.IntN(20_000)) - 10_000) * 1000
		}
		in := &stream.Batch{Len: n, Columns: []stream.Column{
			{Name: "ts", Type: stream.Timestamp, Int64s: ts},
			{Name: "k", Type: stream.String, Strings: ks},
			{Name: "n", Type: stream.Int64, Int64s: make([]int64, n)},
		}}
		// The batch's own watermark: its greatest event time less the delay.
		newWmMs := wmMs
		if within && n > 0 {
			newWmMs = max(wmMs, slices.Max(ts)/1000-delay.Milliseconds())
		}
		// The oracle, row by row.
		var want []string
		next := maps.Clone(seen)
		for i, k := range ks {
			if within && ts[i] <= wmMs*1000 {
				continue // late
			}
			if _, ok := next[k]; ok {
				continue
			}
			next[k] = ts[i] + delay.Microseconds()
			want = append(want, k)
		}
		if within {
			for k, exp := range next {
				if exp <= newWmMs*1000 {
					delete(next, k)
				}
			}
		}
		process := func() []string {
			// In chunks, as the engine feeds files.
			for lo := 0; lo < n; lo += 50 {
				hi := min(lo+50, n)
				chunk := &stream.Batch{Len: hi - lo}
				for _, c := range in.Columns {
					c2 := c
					if c.Strings != nil {
						c2.Strings = c.Strings[lo:hi]
					} else {
						c2.Int64s = c.Int64s[lo:hi]
					}
					chunk.Columns = append(chunk.Columns, c2)
				}
				if err := op.Process(ctx, id, wmMs, chunk); err != nil {
					t.Fatal(err)
				}
			}
			out, _, err := op.Finish(ctx, id, newWmMs)
			if err != nil {
				t.Fatal(err)
			}
			return slices.Clone(out.Column("k").Strings)
		}
		got := process()
		if !slices.Equal(got, want) {
			t.Fatalf("batch %d: emitted %v, want %v", id, got, want)
		}
		switch r.IntN(6) {
		case 0: // the sink failed: abort, reopen at the last commit, re-run
			if r.IntN(2) == 0 {
				if err := op.PrepareCommit(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			op.Abort()
			if err := op.Close(); err != nil {
				t.Fatal(err)
			}
			op = open(committed)
			if got := process(); !slices.Equal(got, want) {
				t.Fatalf("batch %d re-run: emitted %v, want %v", id, got, want)
			}
		case 1: // an abort in the same process, then the re-run
			op.Abort()
			if got := process(); !slices.Equal(got, want) {
				t.Fatalf("batch %d re-run after an abort: emitted %v, want %v", id, got, want)
			}
		}
		if err := op.PrepareCommit(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := op.Commit(ctx, id); err != nil {
			t.Fatal(err)
		}
		committed, seen, wmMs = id, next, newWmMs
		if got := op.store.NumKeys(); got != int64(len(seen)) {
			t.Fatalf("after batch %d: %d keys in state, want %d", id, got, len(seen))
		}
		if r.IntN(5) == 0 { // a restart
			if err := op.Close(); err != nil {
				t.Fatal(err)
			}
			op = open(committed)
		}
	}
}

// TestBackfillWritesNoCache: batches of new keys, each twice, write the
// checkpoint and no Pebble file (the filter rules every new key out, so
// nothing reads the committed version and the lazy cache stays unbuilt);
// a key of an earlier batch is then dropped, read from the cache its
// lookup builds.
func TestBackfillWritesNoCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	local := filepath.Join(dir, "local")
	schema := stream.Schema{Fields: []stream.Field{{Name: "hash", Type: stream.String}}}
	op, err := New(Spec{Input: schema, Columns: []string{"hash"}})
	if err != nil {
		t.Fatal(err)
	}
	env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state", "0"), FS: vfs.Default,
		LocalDir: local, Partitions: 8, Version: -1}
	if err := op.Open(ctx, env); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	keys := benchHashes(30_000)
	run := func(id int64, ks []string) int {
		in := &stream.Batch{Len: len(ks), Columns: []stream.Column{{Name: "hash", Type: stream.String, Strings: ks}}}
		return streamtest.RunBatch(t, op, id, 0, in).Len
	}
	// pebbleFiles lists the files under the local dir.
	pebbleFiles := func() []string {
		var fs []string
		_ = filepath.WalkDir(local, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				fs = append(fs, p)
			}
			return nil
		})
		return fs
	}
	for id := int64(0); id < 3; id++ {
		ks := keys[id*10_000 : (id+1)*10_000]
		if n := run(id, append(slices.Clone(ks), ks...)); n != len(ks) {
			t.Fatalf("batch %d emitted %d rows, want %d", id, n, len(ks))
		}
		if fs := pebbleFiles(); len(fs) > 0 {
			t.Fatalf("after batch %d of new keys the cache holds files: %v", id, fs[:min(len(fs), 5)])
		}
	}
	if n := run(3, []string{keys[5], "new"}); n != 1 {
		t.Fatalf("a batch of a key in state and a new one emitted %d rows, want 1", n)
	}
	if len(pebbleFiles()) == 0 {
		t.Fatal("a key in state was dropped without building the cache")
	}
}
