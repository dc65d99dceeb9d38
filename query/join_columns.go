package query

import (
	"slices"
	"strings"

	"github.com/ethstream/ethstream/stream"
)

// Columns are the columns of each relation the query reads from the join's
// rows (join.Side.Columns: the join stores and carries only them and its
// own columns, as Spark's ColumnPruning pushes a projection below a join),
// the relations' columns being schemas; nil for a relation read whole
// (SELECT *, rel.*). The join's own columns (keys, watermarks, the time
// range) are the join's to add.
//
// A SELECT list of columns reads its items. A query over the join's rows
// (WHERE, GROUP BY, HAVING, expressions) reads every column its SELECT
// list and clauses after ON name: qualified (rel.col), unqualified (col),
// or by the join's name for it (alias_col). An identifier that is a
// relation's column counts wherever it stands (a function's or an alias's
// name as well): reading a column too many stores it, one too few would
// leave the query a column the join's rows lack. The WHERE counts whole,
// the conjuncts pushed below the join too, since they run over the join's
// rows again (join.Pushed.Above).
func (jq *JoinQuery) Columns(schemas [2]stream.Schema) [2][]string {
	read := [2]map[string]bool{{}, {}}
	all := [2]bool{}
	// names maps a lower-case name to the relations' columns it may be.
	type ref struct {
		side int
		col  string
	}
	names := map[string][]ref{}
	for side := range schemas {
		for _, f := range schemas[side].Fields {
			names[strings.ToLower(f.Name)] = append(names[strings.ToLower(f.Name)], ref{side, f.Name})
			if n, ok := jq.OutputName(schemas, side, f.Name); ok && !strings.EqualFold(n, f.Name) {
				names[strings.ToLower(n)] = append(names[strings.ToLower(n)], ref{side, f.Name})
			}
		}
	}
	unqualified := func(name string) {
		for _, r := range names[strings.ToLower(name)] {
			read[r.side][r.col] = true
		}
	}
	qualified := func(side int, name string) {
		for _, f := range schemas[side].Fields {
			if strings.EqualFold(f.Name, name) {
				read[side][f.Name] = true
			}
		}
	}
	if jq.outer == nil {
		if jq.Star {
			return [2][]string{}
		}
		for _, it := range jq.Items {
			switch {
			case it.All && it.Side >= 0:
				all[it.Side] = true
			case it.Side >= 0:
				qualified(it.Side, it.Col)
			default:
				unqualified(it.Col)
			}
		}
	} else {
		o := jq.outer
		ranges := [][2]int{o.sel}
		if o.rest > 0 {
			ranges = append(ranges, [2]int{o.rest, len(o.toks)})
		}
		for _, rg := range ranges {
			for i := rg[0]; i < rg[1]; i++ {
				t := o.toks[i]
				if t.punct("*") && (i == rg[0] || o.toks[i-1].punct(",") || o.toks[i-1].is("select") || o.toks[i-1].is("distinct")) {
					all = [2]bool{true, true} // SELECT *
					continue
				}
				if t.kind != tIdent && t.kind != tQuoted {
					continue
				}
				side := -1
				if i+2 < rg[1] && o.toks[i+1].punct(".") {
					for s, r := range jq.Rels {
						if strings.EqualFold(t.text, r.Ref()) {
							side = s
						}
					}
				}
				if side < 0 {
					unqualified(t.text)
					continue
				}
				if c := o.toks[i+2]; c.punct("*") {
					all[side] = true
				} else {
					qualified(side, c.text)
				}
				i += 2
			}
		}
	}
	var out [2][]string
	for side := range out {
		if all[side] {
			continue
		}
		out[side] = []string{}
		for _, f := range schemas[side].Fields {
			if read[side][f.Name] {
				out[side] = append(out[side], f.Name)
			}
		}
		out[side] = slices.Clip(out[side])
	}
	return out
}
