package stream

import (
	"strings"
	"testing"
)

func TestBatchSignsValidate(t *testing.T) {
	b := &Batch{Len: 2, Columns: []Column{{Name: "n", Type: Int64, Int64s: []int64{1, 2}}}}
	if err := b.Validate(); err != nil || b.Sign(0) != 1 || b.Sign(1) != 1 {
		t.Fatalf("nil signs: err=%v signs %d %d", err, b.Sign(0), b.Sign(1))
	}
	b.Signs = []int8{1, -1}
	if err := b.Validate(); err != nil || b.Sign(1) != -1 {
		t.Fatalf("valid signs: err=%v sign %d", err, b.Sign(1))
	}
	for _, bad := range [][]int8{{1}, {1, 0}, {2, 1}} {
		b.Signs = bad
		if err := b.Validate(); err == nil {
			t.Errorf("signs %v accepted", bad)
		}
	}
}

func TestSchemaStringEqual(t *testing.T) {
	a := Schema{Fields: []Field{{Name: "w", Type: Timestamp}, {Name: "miner", Type: String, Nullable: true}, {Name: "count", Type: Int64}}, Key: []string{"w", "miner"}}
	if got, want := a.String(), "w timestamp, miner string null, count int64 (key: w, miner)"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	b := a
	b.Fields = append([]Field(nil), a.Fields...)
	if !a.Equal(b) {
		t.Fatal("copy not equal")
	}
	b.Fields[2].Type = Float64
	if a.Equal(b) || !strings.Contains(b.String(), "count float64") {
		t.Fatalf("type change not seen: %s", b)
	}
	c := a
	c.Key = []string{"w"}
	if a.Equal(c) {
		t.Fatal("key change not seen")
	}
	if a.Field("miner") == nil || a.Field("nope") != nil {
		t.Fatal("Field lookup")
	}
}
