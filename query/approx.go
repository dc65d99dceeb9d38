package query

import (
	"strconv"

	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/filter"
)

// relativeSD reads approx_count_distinct's second argument, which Spark
// requires to be a constant number (its relativeSD; the aggregation
// checks its range).
func (r *resolver) relativeSD(pos int, call expr.Call) (float64, error) {
	l, ok := call.Args[1].(filter.Lit)
	var v float64
	var err error
	switch {
	case ok && l.Kind == filter.LitInt:
		v = float64(l.Int)
	case ok && l.Kind == filter.LitFloat:
		v = l.Flt
	case ok && l.Kind == filter.LitDecimal:
		v, err = strconv.ParseFloat(l.Str, 64)
	default:
		ok = false
	}
	if !ok || err != nil || v <= 0 {
		return 0, invalidQuery(r.src, pos, "pass the relative standard deviation as a number, e.g. approx_count_distinct(miner, 0.01)",
			"%s: the second argument (relativeSD) must be a positive constant number", call)
	}
	return v, nil
}
