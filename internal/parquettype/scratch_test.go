package parquettype

import (
	"fmt"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/stream"
)

// wideDecimals is a DECIMAL(38,2) column of n values, each its own.
func wideDecimals(n int) (stream.Type, *stream.Column) {
	t := stream.DecimalOf(38, 2)
	v := &stream.Column{Type: t, Valid: make([]bool, n)}
	for i := range n {
		text := fmt.Sprintf("%d12345678901234567890.%02d", i-n/2, i%100)
		d, ok := stream.ParseDecimal(text, 38, 2)
		if !ok {
			panic("decimal " + text)
		}
		v.Decimals = append(v.Decimals, d)
		v.Valid[i] = true
	}
	return t, v
}

// TestScratchKeepsValues: the values one Scratch encodes keep their bytes
// while it grows (each still decodes to its decimal once all are
// encoded), and after Reset the next values reuse its memory.
func TestScratchKeepsValues(t *testing.T) {
	typ, v := wideDecimals(3000)
	var sc Scratch
	for round := range 2 {
		sc.Reset()
		vals := make([]parquet.Value, 0, 3000)
		for i := range v.Decimals {
			vals = append(vals, sc.Value(typ, v, i))
		}
		for i, x := range vals {
			b := x.ByteArray()
			d, err := columnar.BigEndianDec(b)
			if err != nil || d != v.Decimals[i] || len(b) != columnar.DecimalFixedLen(38) {
				t.Fatalf("round %d, value %d: %d bytes decode to %v (%v), want %v", round, i, len(b), d, err, v.Decimals[i])
			}
		}
	}
	if got := allocsPerChunk(typ, v, &sc); got != 0 {
		t.Fatalf("a chunk encoded with a warm Scratch allocates %v times, want 0", got)
	}
}

// allocsPerChunk is the allocations of encoding v's values into sc once
// sc has held a chunk as large.
func allocsPerChunk(typ stream.Type, v *stream.Column, sc *Scratch) float64 {
	return testing.AllocsPerRun(5, func() {
		sc.Reset()
		for i := range v.Decimals {
			_ = sc.Value(typ, v, i)
		}
	})
}

// BenchmarkWideDecimalValue: a chunk of 1024 DECIMAL(38,2) values
// encoded for a writer, by Value (a value's bytes allocated each) and by
// a reused Scratch (none once warm): see allocs/op.
func BenchmarkWideDecimalValue(b *testing.B) {
	typ, v := wideDecimals(1024)
	b.Run("Value", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range v.Decimals {
				_ = Value(typ, v, i)
			}
		}
	})
	b.Run("Scratch", func(b *testing.B) {
		b.ReportAllocs()
		var sc Scratch
		for b.Loop() {
			sc.Reset()
			for i := range v.Decimals {
				_ = sc.Value(typ, v, i)
			}
		}
	})
}
