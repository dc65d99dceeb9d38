package join

import (
	"fmt"
	"testing"
)

// TestSlabsNoAliasing: what slabs hands out never shares memory with
// anything handed out before, across arrays and for every size: each row,
// key and keyRows, written after all were handed out, reads back as
// written.
func TestSlabsNoAliasing(t *testing.T) {
	var s slabs
	var rows []row
	var keys []string
	var krs []*keyRows
	for i := range 1000 {
		r := s.row(1 + i%9)
		for j := range r {
			if r[j] != (value{}) {
				t.Fatalf("row %d handed out with column %d set", i, j)
			}
		}
		rows = append(rows, r)
		keys = append(keys, s.key([]byte(fmt.Sprintf("key-%d-%0*d", i, i%200, i))))
		k := s.keyRows()
		if k.key != "" || k.rows != nil {
			t.Fatalf("keyRows %d handed out set", i)
		}
		krs = append(krs, k)
	}
	for i := range rows {
		for j := range rows[i] {
			rows[i][j] = intValue(int64(i*100 + j))
		}
		krs[i].stored = int64(i)
	}
	for i := range rows {
		for j := range rows[i] {
			if rows[i][j].i() != int64(i*100+j) {
				t.Fatalf("row %d column %d reads %d: overwritten", i, j, rows[i][j].i())
			}
		}
		if want := fmt.Sprintf("key-%d-%0*d", i, i%200, i); keys[i] != want {
			t.Fatalf("key %d reads %q, want %q", i, keys[i], want)
		}
		if krs[i].stored != int64(i) {
			t.Fatalf("keyRows %d reads %d: overwritten", i, krs[i].stored)
		}
	}
	if s.key(nil) != "" {
		t.Fatalf("an empty key is not empty")
	}
}
