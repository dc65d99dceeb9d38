package join

import (
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/ethstream/ethstream/state"
)

// TestStoredRowsShareKeyBytes: a stored row's join key column holds the
// bytes of its key's encoding, not the input column's (which a row kept
// alive whole until its eviction), and both sides' rows of one key share
// one copy of it. The key "k\x00b" needs an escape in its encoding before
// its last byte: its rows keep the input's bytes.
func TestStoredRowsShareKeyBytes(t *testing.T) {
	ctx := context.Background()
	o := openInnerMemTest(t)
	base := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	var rows [2][]memTestRow
	raw := map[string]string{} // encoded key -> the input's
	for i := range 40 {
		// Both sides' keys k0..k9 and a side's own (a0.., b0..), in turn.
		for s, own := range []string{"a", "b"} {
			k := fmt.Sprint("k", i%10)
			if i%3 == s {
				k = fmt.Sprint(own, i)
			}
			if i == 7 {
				k = "k\x00b"
			}
			raw[string(state.AppendStringKey(nil, k))] = k
			rows[s] = append(rows[s], memTestRow{k: k, ts: base + int64(i)*1e6, v: int64(i)})
		}
	}
	for s := range 2 {
		if err := o.ProcessSide(ctx, 0, 0, s, memTestBatch(rows[s])); err != nil {
			t.Fatal(err)
		}
	}
	col := o.p.sides[0].keys[0]
	shared := 0
	for s, m := range o.mem {
		for k := range m.keys.all {
			key := k.key
			for i, sr := range k.rows {
				got := sr.r[col].s()
				if got != raw[key] {
					t.Fatalf("side %d key %q row %d: key column %q, want %q", s, key, i, got, raw[key])
				}
				if raw[key] != "k\x00b" && unsafe.StringData(got) != unsafe.StringData(k.key) {
					t.Fatalf("side %d key %q row %d: the key column holds bytes of its own, not its key's", s, key, i)
				}
			}
			if other, _ := o.mem[1-s].keys.find([]byte(key), keyHashString(key)); other != nil && s == 0 {
				if unsafe.StringData(other.key) != unsafe.StringData(k.key) {
					t.Fatalf("key %q: each side holds a copy of its own", key)
				}
				shared++
			}
		}
	}
	if shared < 10 {
		t.Fatalf("%d keys on both sides: the input tests nothing", shared)
	}
}

// TestOutputRoomFromLastBatch: a batch's joined-row columns are made once,
// with the batch before's rows and an eighth more as room (grown by append
// from empty, a backfill batch's columns were copied into fresh memory
// about four times their size), so that a batch joining a few more rows
// than the one before does not grow them; the first batch's double from
// 1,024 rows.
func TestOutputRoomFromLastBatch(t *testing.T) {
	ctx := context.Background()
	o := openInnerMemTest(t)
	base := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	var lens []int
	for id, n := range []int{1500, 1501, 3} {
		var rows []memTestRow
		for i := range n {
			rows = append(rows, memTestRow{k: fmt.Sprint("k", id, i), ts: base + int64(i)*1e6, v: int64(i)})
		}
		for s := range 2 {
			if err := o.ProcessSide(ctx, int64(id), 0, s, memTestBatch(rows)); err != nil {
				t.Fatal(err)
			}
		}
		res, _, err := o.Finish(ctx, int64(id), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Commit(ctx, int64(id)); err != nil {
			t.Fatal(err)
		}
		if res.Len != n {
			t.Fatalf("batch %d: %d joined rows, want %d", id, res.Len, n)
		}
		lens = append(lens, res.Len)
		for _, c := range res.Columns {
			room := max(cap(c.Int64s), cap(c.Strings), cap(c.Float64s))
			if id == 0 && room != 2048 {
				t.Fatalf("batch 0: column %s has room for %d rows, want 2,048 (1,024 doubled)", c.Name, room)
			}
			if want := lens[max(id-1, 0)] + lens[max(id-1, 0)]/8; id > 0 && room != want {
				t.Fatalf("batch %d: column %s has room for %d rows, want the batch before's %d and an eighth more, %d", id, c.Name, room, lens[id-1], want)
			}
		}
	}
}

// openInnerMemTest opens an inner join of memTestSpec on memTestEnv,
// closed at the test's end.
func openInnerMemTest(t *testing.T) *Operator {
	t.Helper()
	o, err := New(memTestSpec(Inner))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Open(context.Background(), memTestEnv(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}
