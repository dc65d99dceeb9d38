package delta

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// propLayout is a random output schema: an optional window, one or two
// nullable group keys of any column type, and one or two value columns.
func propLayout(rng *rand.Rand) stream.Schema {
	var s stream.Schema
	if rng.Intn(3) > 0 {
		s.Fields = append(s.Fields, stream.Field{Name: KeyWindowStart, Type: stream.Timestamp}, stream.Field{Name: KeyWindowEnd, Type: stream.Timestamp})
		s.Key = append(s.Key, KeyWindowStart, KeyWindowEnd)
	}
	types := []stream.Type{stream.String, stream.Int64, stream.Float64, stream.Timestamp}
	for i := range 1 + rng.Intn(2) {
		name := fmt.Sprintf("k%d", i)
		s.Fields = append(s.Fields, stream.Field{Name: name, Type: types[rng.Intn(len(types))], Nullable: true})
		s.Key = append(s.Key, name)
	}
	for i := range 1 + rng.Intn(2) {
		s.Fields = append(s.Fields, stream.Field{Name: fmt.Sprintf("v%d", i), Type: types[rng.Intn(3)], Nullable: true})
	}
	return s
}

// propValue is one cell: nil for a null, else int64, float64 or string.
type propValue = any

// propCell draws a value of t from a small domain, so keys repeat; key
// cells are null one time in five, and doubles include NaN, -0 and
// infinities.
func propCell(rng *rand.Rand, t stream.Type, nullable bool) propValue {
	if nullable && rng.Intn(5) == 0 {
		return nil
	}
	switch t {
	case stream.String:
		return []string{"", "a", "b", "0x" + strings.Repeat("ab", 20), "0x" + strings.Repeat("ab", 19) + "ac", "é"}[rng.Intn(6)]
	case stream.Float64:
		return []float64{0, math.Copysign(0, -1), 1.5, -2, math.NaN(), math.Inf(1), 1e300}[rng.Intn(7)]
	case stream.Timestamp:
		return baseTS + int64(rng.Intn(6))*window + int64(rng.Intn(2))
	}
	return int64(rng.Intn(7) - 3)
}

// propKey renders a row's key as the oracle's map key: null-safe (a null
// is one value), NaN one value, -0 equal to 0, like Spark's <=>.
func propKey(s stream.Schema, row []propValue) string {
	var b strings.Builder
	for _, k := range s.Key {
		i := fieldIndex(s, k)
		switch v := row[i].(type) {
		case nil:
			b.WriteString("N|")
		case float64:
			switch {
			case math.IsNaN(v):
				b.WriteString("NaN|")
			case v == 0:
				b.WriteString("f0|")
			default:
				b.WriteString("f" + strconv.FormatFloat(v, 'g', -1, 64) + "|")
			}
		default:
			fmt.Fprintf(&b, "%T:%v|", v, v)
		}
	}
	return b.String()
}

func fieldIndex(s stream.Schema, name string) int {
	for i, f := range s.Fields {
		if f.Name == name {
			return i
		}
	}
	panic(name)
}

// propBatch converts rows to an engine batch of s (window_end = start + 5 min).
func propBatch(s stream.Schema, rows [][]propValue, signs []int8) *stream.Batch {
	b := &stream.Batch{Len: len(rows), Signs: signs}
	for i, f := range s.Fields {
		c := stream.Column{Name: f.Name, Type: f.Type, Valid: make([]bool, len(rows))}
		for r, row := range rows {
			v := row[i]
			c.Valid[r] = v != nil
			switch f.Type {
			case stream.String:
				x, _ := v.(string)
				c.Strings = append(c.Strings, x)
			case stream.Float64:
				x, _ := v.(float64)
				c.Float64s = append(c.Float64s, x)
			default:
				x, _ := v.(int64)
				c.Int64s = append(c.Int64s, x)
			}
		}
		b.Columns = append(b.Columns, c)
	}
	return b
}

// propRender renders a row for comparison: NaN as NaN, -0 kept.
func propRender(row []propValue) string {
	parts := make([]string, len(row))
	for i, v := range row {
		switch x := v.(type) {
		case nil:
			parts[i] = "null"
		case float64:
			parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
			if math.Signbit(x) && x == 0 {
				parts[i] = "-0"
			}
		default:
			parts[i] = fmt.Sprint(x)
		}
	}
	return strings.Join(parts, ",")
}

// propTable reads the table with the generic reader (not the MERGE's own
// columnar decoder) as rendered rows in the order of s's fields.
func propTable(t *testing.T, dir string, s stream.Schema) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	err = snap.Rows(ctx, func(m map[string]any) error {
		row := make([]propValue, len(s.Fields))
		for i, f := range s.Fields {
			var v any
			switch f.Name {
			case KeyWindowStart, KeyWindowEnd:
				w, _ := m[windowField].(map[string]any)
				v = w[map[string]string{KeyWindowStart: windowStart, KeyWindowEnd: windowEnd}[f.Name]]
			default:
				v = m[f.Name]
			}
			if ts, ok := v.(time.Time); ok {
				v = ts.UnixMicro()
			}
			row[i] = v
		}
		out = append(out, propRender(row))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestMergeMatchesBruteForceUpsert: over random output schemas (with and
// without a window, keys of every column type), random batches of upserts
// and deletions (sign -1) with null keys, NaN, -0, duplicate keys within a
// batch and small files, the one MERGE leaves the table a map-based upsert
// (null-safe keys, last row of a key wins) leaves, reports the inserted,
// updated and deleted counts the map sees, and keeps doing so across
// OPTIMIZE runs.
func TestMergeMatchesBruteForceUpsert(t *testing.T) {
	ctx := context.Background()
	runs := 12
	if testing.Short() {
		runs = 4
	}
	for run := range runs {
		rng := rand.New(rand.NewSource(int64(100 + run)))
		s := propLayout(rng)
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			dir := t.TempDir()
			m, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog, TargetFileRows: 2 + rng.Intn(6), AutoCompactMinFiles: -1})
			closeAtEnd(t, m)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Open(ctx, stream.SinkEnv{QueryID: "prop", Schema: s}); err != nil {
				t.Fatal(err)
			}
			oracle := map[string][]propValue{}
			for batch := range int64(25) {
				var rows [][]propValue
				var signs []int8
				for range rng.Intn(15) {
					row := make([]propValue, len(s.Fields))
					for i, f := range s.Fields {
						switch f.Name {
						case KeyWindowStart:
							row[i] = baseTS + int64(rng.Intn(4))*window
						case KeyWindowEnd:
							row[i] = row[i-1].(int64) + window
						default:
							row[i] = propCell(rng, f.Type, f.Nullable)
						}
					}
					rows = append(rows, row)
					sign := int8(1)
					if rng.Intn(4) == 0 {
						sign = -1
					}
					signs = append(signs, sign)
				}
				// The oracle: apply the batch's last row of each key.
				last := map[string]int{}
				for i, r := range rows {
					last[propKey(s, r)] = i
				}
				var ins, upd, del int64
				for k, i := range last {
					_, had := oracle[k]
					switch {
					case signs[i] < 0 && had:
						del++
						delete(oracle, k)
					case signs[i] < 0:
					case had:
						upd++
						oracle[k] = rows[i]
					default:
						ins++
						oracle[k] = rows[i]
					}
				}
				p, err := m.AddBatch(ctx, batch, propBatch(s, rows, signs))
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) > 0 {
					got := p.Metrics["numTargetRowsInserted"] + "/" + p.Metrics["numTargetRowsUpdated"] + "/" + p.Metrics["numTargetRowsDeleted"]
					if want := fmt.Sprintf("%d/%d/%d", ins, upd, del); got != want {
						t.Fatalf("schema %s batch %d: inserted/updated/deleted %s, oracle %s", s, batch, got, want)
					}
				}
				var want []string
				for _, r := range oracle {
					want = append(want, propRender(r))
				}
				sort.Strings(want)
				if got := propTable(t, dir, s); strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("schema %s batch %d: table\n%s\noracle\n%s", s, batch, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if rng.Intn(6) == 0 {
					m.waitMaintenance()
					if _, err := m.table.Optimize(ctx, OptimizeOptions{TargetFileRows: 4 + rng.Intn(8)}); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// TestNullKeysMatch: a null key column matches a null (Spark's <=>), so a
// group whose key is null is one row of the table, updated and deleted like
// any other, also when its file's min/max of that column do not include
// the empty string a null reads as (the file is a candidate through its
// nullCount).
func TestNullKeysMatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newSink(t, dir, 2)
	nullMinerRow := func(count int64) refRow { r := row(0, "s", "", count); r.nulls = nullMiner; return r }
	nullSourceRow := func(count int64) refRow { r := row(0, "", "m", count); r.nulls = nullSource; return r }
	add := func(id int64, rows ...refRow) map[string]string {
		t.Helper()
		return signed(rows).add(ctx, t, s, id)
	}
	// Sorted null first: files [(null, m), (s, null)], [(s, a), (s, b)],
	// [(s, c)]; the null miner's file has min miner m.
	add(0, nullMinerRow(1), row(0, "s", "a", 1), row(0, "s", "b", 1), row(0, "s", "c", 1), nullSourceRow(2))
	for _, f := range s.snap.Files() {
		if strings.Contains(f.Stats, `"miner":1,`) && !strings.Contains(f.Stats, `"source":"s","miner":"m","count":1}`) {
			t.Fatalf("the null miner's file has stats %s, want min miner m", f.Stats)
		}
	}
	m := add(1, nullMinerRow(9), nullSourceRow(7))
	if m["numTargetRowsUpdated"] != "2" || m["numTargetRowsInserted"] != "0" {
		t.Fatalf("metrics %v, want 2 updated, 0 inserted", m)
	}
	read := func() map[string]int64 {
		got := map[string]int64{}
		if err := s.snap.refRows(ctx, func(r *refRow) error {
			k := fmt.Sprintf("%s/%s/%d", r.Source, r.Miner, r.nulls)
			if _, dup := got[k]; dup {
				return fmt.Errorf("key %s twice", k)
			}
			got[k] = r.Count
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := map[string]int64{"s//8": 9, "s/a/0": 1, "s/b/0": 1, "s/c/0": 1, "/m/4": 7}
	if got := read(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	// A deletion of the null key removes that row only; an empty string is
	// another key.
	del := nullMinerRow(0)
	del.del = true
	m = add(2, del, row(0, "s", "", 3))
	if m["numTargetRowsDeleted"] != "1" || m["numTargetRowsInserted"] != "1" {
		t.Fatalf("metrics %v, want 1 deleted, 1 inserted", m)
	}
	delete(want, "s//8")
	want["s//0"] = 3
	if got := read(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	if hist, err := s.table.History(ctx); err != nil || !strings.Contains(fmt.Sprint(hist[0].OperationParameters["predicate"]), "(t.miner <=> s.miner)") {
		t.Fatalf("predicate %v (%v), want the null-safe match", hist[0].OperationParameters["predicate"], err)
	}
}
