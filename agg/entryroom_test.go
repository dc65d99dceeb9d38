package agg

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// TestEntryColumnsGrowByDoubling: a partial's entry columns grow together
// and at least double each time (reserve), so a batch of many new keys
// copies each about once, not the four times append's growth by a quarter
// copies a large slice; and the room stays for the next batch.
func TestEntryColumnsGrowByDoubling(t *testing.T) {
	p, err := newPlan(propertySpecs["reference"])
	if err != nil {
		t.Fatal(err)
	}
	pt := newPartial(p)
	const chunk, chunks = 1000, 300 // 300,000 new keys
	const t0 = int64(1_793_491_200_000_000)
	ts := stream.Column{Name: ethblock.ColBlockTS, Type: stream.Timestamp, Int64s: make([]int64, chunk)}
	src := stream.Column{Name: stream.ColSource, Type: stream.String, Strings: make([]string, chunk)}
	miner := stream.Column{Name: ethblock.ColMiner, Type: stream.String, Strings: make([]string, chunk)}
	// Each column's room, as it changes.
	caps := map[string][]int{}
	note := func(name string, n int) {
		if c := caps[name]; len(c) == 0 || c[len(c)-1] != n {
			caps[name] = append(c, n)
		}
	}
	for c := range chunks {
		for i := range chunk {
			// Each row a window of its own: a new entry.
			ts.Int64s[i] = t0 + int64(c*chunk+i)*int64(5*time.Minute/time.Microsecond)
			src.Strings[i], miner.Strings[i] = "archive", fmt.Sprintf("0x%02x", i%50)
		}
		in := &stream.Batch{Len: chunk, Columns: []stream.Column{ts, src, miner}}
		if _, err := pt.add(in, math.MinInt64); err != nil {
			t.Fatal(err)
		}
		note("start", cap(pt.start))
		for k := range pt.gSid {
			note(fmt.Sprint("gSid", k), cap(pt.gSid[k]))
			note(fmt.Sprint("gNull", k), cap(pt.gNull[k]))
		}
		for a := range pt.acc {
			note(fmt.Sprint("ints", a), cap(pt.acc[a].ints))
		}
	}
	if pt.len() != chunk*chunks {
		t.Fatalf("%d entries, want %d", pt.len(), chunk*chunks)
	}
	for name, c := range caps {
		for i := 1; i < len(c); i++ {
			if c[i] < 2*c[i-1] {
				t.Fatalf("%s's room grew %v: by less than double from %d", name, c, c[i-1])
			}
		}
	}
	room := cap(pt.start)
	pt.reset()
	if cap(pt.start) != room {
		t.Errorf("reset left room for %d entries, had %d", cap(pt.start), room)
	}
}
