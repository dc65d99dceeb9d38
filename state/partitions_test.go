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
	dir := t.TempDir()
	p := newPartitions(nil, dir, newGen(), 1, 0, slog.Default())
	defer p.close()
	o := p.instanceOptions()
	o.MemTableSize = 64 << 10
	d, err := pebble.Open(filepath.Join(p.dir, "p-0"), o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const keys = 4000
	for round := range 12 {
		val := bytes.Repeat([]byte{byte('a' + round)}, 100)
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
	m := d.Metrics()
	if m.Compact.Count < 2 {
		t.Fatalf("%d compactions after 12 overlapping flushes", m.Compact.Count)
	}
	last := bytes.Repeat([]byte{byte('a' + 11)}, 100)
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
