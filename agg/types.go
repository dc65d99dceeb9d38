package agg

import (
	"math"
	"math/big"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Types of group keys and aggregates beyond BIGINT, DOUBLE, STRING and
// TIMESTAMP. A group key is held in one of the partial table's two key
// paths: strings (STRING, BINARY, and DECIMAL as its 16 order-preserving
// bytes, stream.Dec128.AppendKey) or integers (every integer-like kind,
// and FLOAT/DOUBLE as their normalised IEEE bits). Aggregates run on
// int64s, float64s or 128-bit decimals (Spark's result types: sum of an
// integer is BIGINT, of a float DOUBLE, of DECIMAL(p,s) DECIMAL(min(38,
// p+10), s); avg of DECIMAL(p,s) is DECIMAL(min(38, p+4), min(38, s+4))
// over a sum buffer of DECIMAL(min(38, p+10), s); min and max keep the
// input type).

// strKey reports whether group column k uses the strings path.
func (p *plan) strKey(k int) bool {
	return strKeyType(p.groupType[k])
}

// floatKey reports whether group column k holds float bits in the
// integers path.
func (p *plan) floatKey(k int) bool { return p.groupType[k].Storage() == stream.Float64 }

// groupable reports whether a column of type t can be a group key.
func groupable(t stream.Type) error {
	if t.Kind() == stream.Array || t == stream.Decimal || t.Kind() == 0 {
		return errcode.New(CodeDatatypeMismatch, "", "group by a scalar column (e.g. explode the array first, or cast it to STRING)",
			"grouping by a column of type %s is not supported", t)
	}
	return nil
}

// integral reports whether t is an integer kind (sum and avg take it).
func integral(t stream.Type) bool {
	switch t {
	case stream.Int8, stream.Int16, stream.Int32, stream.Int64:
		return true
	}
	return false
}

// orderable reports whether min and max take t.
func orderable(t stream.Type) bool {
	switch t.Kind() {
	case stream.Array, stream.String, stream.Binary, 0:
		return false
	case stream.Decimal:
		return t != stream.Decimal
	}
	return true
}

// sumDecimal is Spark's sum result (and avg buffer) type of DECIMAL(p, s).
func sumDecimal(t stream.Type) stream.Type {
	return stream.DecimalOf(min(stream.MaxDecimalPrecision, t.Precision()+10), t.Scale())
}

// avgDecimal is Spark's avg result type of DECIMAL(p, s).
func avgDecimal(t stream.Type) stream.Type {
	return stream.DecimalOf(min(stream.MaxDecimalPrecision, t.Precision()+4), min(stream.MaxDecimalPrecision, t.Scale()+4))
}

// floatKeyBits is the key of a float group value: its IEEE bits with -0.0
// as 0.0 and every NaN as one NaN (Spark's NormalizeFloatingNumbers).
func floatKeyBits(f float64) int64 {
	switch {
	case f == 0:
		return 0
	case math.IsNaN(f):
		return int64(math.Float64bits(math.NaN()))
	}
	return int64(math.Float64bits(f))
}

// adaptKey returns group column c in its key path's storage: a decimal
// column as Strings of its 16-byte keys, a float column as Int64s of its
// normalised bits; other columns unchanged.
func adaptKey(c *stream.Column) *stream.Column {
	switch {
	case c.Type.Kind() == stream.Decimal:
		out := &stream.Column{Name: c.Name, Type: c.Type, Valid: c.Valid, Strings: make([]string, len(c.Decimals))}
		buf := make([]byte, 0, 16*len(c.Decimals))
		for i, d := range c.Decimals {
			buf = d.AppendKey(buf)
			out.Strings[i] = string(buf[16*i : 16*i+16])
		}
		return out
	case c.Type.Storage() == stream.Float64:
		out := &stream.Column{Name: c.Name, Type: c.Type, Valid: c.Valid, Int64s: make([]int64, len(c.Float64s))}
		for i, f := range c.Float64s {
			out.Int64s[i] = floatKeyBits(f)
		}
		return out
	}
	return c
}

// accDec folds a decimal column into a sum, min or max; a sum that leaves
// 128 bits sets overflow (its type's precision is checked at merge).
func accDec(kind AggKind, acc *accum, vs []stream.Dec128, valid []bool, idx []int32, signs []int8) {
	out, nn := acc.decs, acc.nn
	for i, g := range idx {
		if g < 0 || (valid != nil && !valid[i]) {
			continue
		}
		v := vs[i]
		s := int64(1)
		if signs != nil && signs[i] < 0 {
			v, s = v.Neg(), -1
		}
		switch kind {
		case Sum, Avg:
			var ok bool
			if out[g], ok = out[g].Add(v); !ok {
				acc.overflow = true
			}
		case Min:
			if nn[g] == 0 || v.Cmp(out[g]) < 0 {
				out[g] = v
			}
		case Max:
			if nn[g] == 0 || v.Cmp(out[g]) > 0 {
				out[g] = v
			}
		}
		nn[g] += s
	}
}

// avgFits reports whether the average of sum over n values fits the avg's
// type: DECIMAL(38,4) cannot hold the average of DECIMAL(38,0) values
// near 10^37, which Spark's ANSI cast of the average to its result type
// refuses (null without ANSI); here the batch fails with
// ARITHMETIC_OVERFLOW, as a decimal sum's overflow does.
func avgFits(sum stream.Dec128, n int64, from, out stream.Type) bool {
	num := new(big.Int).Mul(sum.Big(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(out.Scale()-from.Scale())), nil))
	d, ok := stream.DecimalOfRat(new(big.Rat).SetFrac(num, big.NewInt(n)), stream.MaxDecimalPrecision, 0)
	return ok && d.Fits(out.Precision())
}

// avgOfDecimal is sum / n rounded HALF_UP to the avg's scale (sum has
// the input's scale from).
func avgOfDecimal(sum stream.Dec128, n int64, from, out stream.Type) stream.Dec128 {
	num := new(big.Int).Mul(sum.Big(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(out.Scale()-from.Scale())), nil))
	r := new(big.Rat).SetFrac(num, big.NewInt(n))
	d, ok := stream.DecimalOfRat(r, stream.MaxDecimalPrecision, 0)
	if !ok {
		panic("agg: an average larger than its sum")
	}
	return d
}
