package delta

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// directSchemas are layouts encodeDirect writes: an aggregation's output
// (a window, strings, longs, doubles, a timestamp) and one without a
// window.
func directSchemas() []stream.Schema {
	win := stream.Schema{Key: []string{KeyWindowStart, KeyWindowEnd, "k"}, Fields: []stream.Field{
		{Name: KeyWindowStart, Type: stream.Timestamp}, {Name: KeyWindowEnd, Type: stream.Timestamp},
		{Name: "k", Type: stream.String, Nullable: true}}}
	flat := stream.Schema{Key: []string{"k"}, Fields: []stream.Field{{Name: "k", Type: stream.Int64, Nullable: true}}}
	for i, typ := range []stream.Type{stream.Int64, stream.Float64, stream.String, stream.Timestamp, stream.Float64} {
		f := stream.Field{Name: fmt.Sprintf("c%d", i), Type: typ, Nullable: true}
		win.Fields = append(win.Fields, f)
		flat.Fields = append(flat.Fields, f)
	}
	return []stream.Schema{win, flat}
}

// TestEncodeDirectBytes checks that encodeRows writes the layouts of an
// aggregation's output through encodeDirect, and that its files are, byte
// for byte, those parquet-go's column writers write of the same rows
// (oldEncodeRows: values made by Value.Level), for every type it writes
// (doubles with NaN, infinities and both zeros; empty strings), with and
// without nulls and null windows, mostly nulls (a page of two writes) and
// a column of nulls only, at sizes of one row, of one page under the small
// page buffer of a small file, and of several 8192-row writes and pages;
// and that they read back.
func TestEncodeDirectBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 1))
	for si, s := range directSchemas() {
		l, err := sinkLayout(s, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 90, 1500, 8191, 8192, 8193, 30_000} {
			for _, nulls := range []string{"none", "some", "mostly", "all"} {
				t.Run(fmt.Sprintf("schema %d %d rows nulls=%s", si, n, nulls), func(t *testing.T) {
					rows := everyTypeRows(rng, l, n, nulls != "none")
					for c := range rows.cols {
						for r := range rows.cols[c].Valid {
							if nulls == "all" || nulls == "mostly" && rng.IntN(10) > 0 {
								rows.cols[c].Valid[r] = false
							}
						}
					}
					if _, ok := directLeaves(l.pq, rows); !ok {
						t.Fatal("encodeDirect does not write this layout")
					}
					checkEncodesAsOld(t, l, rows, true)
				})
			}
		}
	}
}

// TestEncodeDirectPageCuts checks encodeDirect's pages against parquet-go's
// where a page's end depends on the exact size of its buffered values: in
// columns with nulls, the first 8192-row write of each holds about as many
// values as fill parquet-go's page buffer (pageBufferSize, 98% of it), so
// that one page holds one write or two.
func TestEncodeDirectPageCuts(t *testing.T) {
	l, err := sinkLayout(directSchemas()[1], nil, "")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(47, 2))
	const n = 2*encodeChunkRows + 100
	for trial := range 40 {
		rows := everyTypeRows(rng, l, n, true)
		for c := range rows.cols {
			// Values a write holds at the buffer's size: (64225 - 5 bytes a
			// row) / 8 for longs and doubles, / about 12.6 for strings
			// (fillScalar's, and their 4-byte offsets).
			k := 2850 + rng.IntN(300)
			if l.leaves[c].typ == stream.String {
				k = 1650 + rng.IntN(400)
			}
			valid := rows.cols[c].Valid[:encodeChunkRows]
			clear(valid)
			for _, r := range rng.Perm(encodeChunkRows)[:k] {
				valid[r] = true
			}
		}
		t.Logf("trial %d", trial)
		checkEncodesAsOld(t, l, rows, false)
	}
}

// TestEncodeDirectSharedStrings checks the pages' string bounds where the
// values share their memory, as an aggregation's output does (one copy per
// group name): the same strings again and again, prefixes of one buffer
// (one address, several lengths), equal strings in other memory, the empty
// string and nulls; the files must be parquet-go's, statistics included.
func TestEncodeDirectSharedStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 3))
	buf := "m0x9c7a1b2e4f"
	var pool []string
	for k := 1; k <= len(buf); k++ {
		pool = append(pool, buf[:k], strings.Clone(buf[:k]))
	}
	var empty string // no memory: the address of an empty slot of the page's seen strings
	pool = append(pool, empty, "0x00", "zz")
	for si, s := range directSchemas() {
		l, err := sinkLayout(s, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{90, 1500, 30_000} {
			t.Run(fmt.Sprintf("schema %d %d rows", si, n), func(t *testing.T) {
				rows := everyTypeRows(rng, l, n, true)
				strs := 0
				for c := range rows.cols {
					if l.leaves[c].typ != stream.String {
						continue
					}
					strs++
					// Few values at a time, so that a page's bounds move
					// while the seen strings repeat.
					w := slices.Clone(pool)
					rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
					w = w[:2+rng.IntN(len(w)-2)]
					for r := range rows.cols[c].Strings {
						rows.cols[c].Strings[r] = w[rng.IntN(len(w))]
					}
				}
				if strs == 0 {
					t.Fatal("no string column")
				}
				checkEncodesAsOld(t, l, rows, true)
			})
		}
	}
}
