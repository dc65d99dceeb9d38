package state

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// granters counts the goroutines of Pebble's periodic compaction granter.
func granters() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "ConcurrencyLimitScheduler).periodicGranter(")
}

// TestInstancesRunNoTicker: open partitions run no periodic goroutine of
// their own (200 of them cost 35 ms of CPU a second, idle).
func TestInstancesRunNoTicker(t *testing.T) {
	before := granters()
	e := newEnv(t, nil)
	s := e.open(20, -1)
	defer s.Close()
	want := map[string]string{}
	leanVersions(t, s, 0, 1, want)
	if n := openCount(s); n != 20 {
		t.Fatalf("%d partitions open, the test wants all 20", n)
	}
	if n := granters() - before; n > 0 {
		t.Fatalf("%d periodic compaction granters run for 20 open partitions", n)
	}
}

// TestInstanceCompacts: an instance with its own scheduler (no periodic
// granter) still compacts, one compaction after another, while writes that
// overlap keep filling L0, and holds every key.
func TestInstanceCompacts(t *testing.T) {
	d := openOne(t)
	const keys = 4000
	rounds := 3 * l0CompactionThreshold
	for round := range rounds {
		setFlush(t, d, keys, bytes.Repeat([]byte{byte('a' + round)}, 100))
	}
	m := d.Metrics()
	if m.Compact.Count < 2 {
		t.Fatalf("%d compactions after %d overlapping flushes", m.Compact.Count, rounds)
	}
	last := bytes.Repeat([]byte{byte('a' + rounds - 1)}, 100)
	it, err := d.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		if !bytes.Equal(it.Value(), last) {
			t.Fatalf("key %q holds an old value", it.Key())
		}
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if n != keys {
		t.Fatalf("%d keys, want %d", n, keys)
	}
}

// openOne opens a one-partition cache's instance with a small memtable.
func openOne(t *testing.T) *pebble.DB {
	t.Helper()
	p := newPartitions(nil, t.TempDir(), newGen(), 1, 0, slog.Default())
	t.Cleanup(func() { _ = p.close() })
	o := p.instanceOptions()
	o.MemTableSize = 64 << 10
	d, err := pebble.Open(filepath.Join(p.dir, "p-0"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// setFlush sets keys k00000000... to val and flushes them into one table.
func setFlush(t *testing.T, d *pebble.DB, keys int, val []byte) {
	t.Helper()
	b := d.NewBatch()
	for j := range keys {
		if err := b.Set(fmt.Appendf(nil, "k%08d", j), val, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestTablesAreUncompressed: the cache's tables store their blocks raw
// (Snappy cost CPU and did not shrink hashes): 1 MB of values that
// compress a hundredfold still takes 1 MB of tables.
func TestTablesAreUncompressed(t *testing.T) {
	d := openOne(t)
	const keys, size = 1000, 1 << 10
	setFlush(t, d, keys, make([]byte, size))
	var tables int64
	for _, l := range d.Metrics().Levels {
		tables += l.TablesSize
	}
	if tables < keys*size {
		t.Fatalf("tables hold %d bytes for %d bytes of values: compressed", tables, keys*size)
	}
}

// TestL0WaitsForThreshold: overlapping flushes stay in L0 until there are
// half l0CompactionThreshold of them (Pebble scores L0 as twice its
// sublevels over the threshold); a backfill's compaction rewrites the
// partition's whole Lbase, so each one must carry several flushes.
func TestL0WaitsForThreshold(t *testing.T) {
	d := openOne(t)
	const flushes = l0CompactionThreshold/2 - 1
	for round := range flushes {
		setFlush(t, d, 1000, []byte{byte(round)})
	}
	m := d.Metrics()
	if m.Compact.Count > 0 || m.Levels[0].TablesCount != flushes {
		t.Fatalf("%d compactions, %d tables in L0 after %d overlapping flushes",
			m.Compact.Count, m.Levels[0].TablesCount, flushes)
	}
}

// TestFlushKeepsEveryDirtyPartition: flush (its flushes started together,
// then waited for) leaves every written partition's keys in its tables,
// so that an instance closed without a WAL and reopened holds them all,
// and clears the dirty marks; a clean partition is left alone.
func TestFlushKeepsEveryDirtyPartition(t *testing.T) {
	const n, keys = 8, 100
	root, gen := t.TempDir(), newGen()
	p := newPartitions(nil, root, gen, n, 0, slog.Default())
	for i := range n {
		if i == 3 {
			continue // opened, never written: not dirty
		}
		d, err := p.db(i)
		if err != nil {
			t.Fatal(err)
		}
		b := d.NewBatch()
		for j := range keys {
			if err := b.Set(fmt.Appendf(nil, "k%d-%04d", i, j), []byte("v"), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		p.dirty[i] = true
	}
	if _, err := p.db(3); err != nil {
		t.Fatal(err)
	}
	if err := p.flush(); err != nil {
		t.Fatal(err)
	}
	for i, dirty := range p.dirty {
		if dirty {
			t.Errorf("partition %d still dirty after flush", i)
		}
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	q := newPartitions(nil, root, gen, n, 0, slog.Default())
	defer q.close()
	for i := range n {
		want := keys
		if i == 3 {
			want = 0
		}
		d, err := q.db(i)
		if err != nil {
			t.Fatal(err)
		}
		it, err := d.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for valid := it.First(); valid; valid = it.Next() {
			got++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("partition %d holds %d keys after flush and reopen, want %d", i, got, want)
		}
	}
}
