package agg

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ethstream/ethstream/agg/hllpp"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// aggVal is one aggregate's value for one key: the running value and, for
// sum/min/max, how many non-null inputs it covers (0 = SQL null).
type aggVal struct {
	i  int64
	f  float64
	d  stream.Dec128
	nn int64
	// hll: approx_count_distinct's registers (nil until merged or read).
	hll hllpp.Sketch
}

// stateKey appends entry e's state key: window_end, window_start, then the
// group columns, in state's order-preserving encoding (window_end first, so
// eviction is a range scan).
func (pt *partial) stateKey(dst []byte, e int) []byte {
	p := pt.p
	if p.window {
		s := pt.start[e]
		dst = state.AppendInt64Key(dst, s+p.sizeUs)
		dst = state.AppendInt64Key(dst, s)
	}
	if !p.window && len(p.groupType) == 0 {
		return state.AppendInt64Key(dst, 0) // globalKeyField
	}
	for k := range p.groupType {
		switch {
		case p.strKey(k) && pt.gNull[k][e]:
			dst = state.AppendNullStringKey(dst)
		case p.strKey(k) && pt.ranked: // the name's encoding (rankNames)
			id := pt.gSid[k][e]
			dst = append(dst, pt.keyEnc[pt.keyEncOff[id]:pt.keyEncOff[id+1]]...)
		case p.strKey(k):
			dst = state.AppendStringKey(dst, pt.keyStr(k, e))
		case p.floatKey(k) && pt.gNull[k][e]:
			dst = append(dst, 0x00) // a nullable float key's null (state, Key encoding)
		case p.floatKey(k) && p.nullKey(k):
			dst = state.AppendFloat64Key(append(dst, 0x01), math.Float64frombits(uint64(pt.gInt[k][e])))
		case p.floatKey(k):
			dst = state.AppendFloat64Key(dst, math.Float64frombits(uint64(pt.gInt[k][e])))
		case p.nullKey(k):
			dst = state.AppendNullableInt64Key(dst, pt.gInt[k][e], pt.gNull[k][e])
		default:
			dst = state.AppendInt64Key(dst, pt.gInt[k][e])
		}
	}
	return dst
}

// encodeValue appends vals in the plan's value schema.
func (p *plan) encodeValue(dst []byte, vals []aggVal) []byte {
	for a := range p.aggs {
		ra := &p.aggs[a]
		if ra.sketch != nil {
			dst = appendSketchValue(dst, ra, vals[a].hll)
		} else if ra.acc().Kind() == stream.Decimal {
			dst = state.AppendStringValue(dst, string(vals[a].d.AppendKey(nil)))
		} else if ra.acc().Storage() == stream.Float64 {
			dst = state.AppendFloat64Value(dst, vals[a].f)
		} else {
			dst = state.AppendInt64Value(dst, vals[a].i)
		}
		if ra.hasNonNull() {
			dst = state.AppendInt64Value(dst, vals[a].nn)
		}
	}
	return dst
}

// decodeValue reads a value written by encodeValue into vals. It decodes the
// value encoding documented in package state (Int64: zig-zag varint, Float64:
// 8 bytes little-endian) directly, because state.DecodeValue boxes every
// field and this runs once per distinct key per batch; a test checks the two
// agree.
func (p *plan) decodeValue(val []byte, vals []aggVal) error {
	for a := range p.aggs {
		ra := &p.aggs[a]
		var ok bool
		if ra.sketch != nil {
			if val, ok = readSketchValue(val, ra, &vals[a]); !ok {
				return p.badValue(a)
			}
		} else if ra.acc().Kind() == stream.Decimal {
			// AppendStringValue of 16 bytes: their length, then them.
			if len(val) < 17 || val[0] != 16 {
				return p.badValue(a)
			}
			vals[a].d = stream.Dec128FromKey(val[1:17])
			val = val[17:]
		} else if ra.acc().Storage() == stream.Float64 {
			if len(val) < 8 {
				return p.badValue(a)
			}
			vals[a].f = math.Float64frombits(binary.LittleEndian.Uint64(val))
			val = val[8:]
		} else {
			if vals[a].i, val, ok = readVarint(val); !ok {
				return p.badValue(a)
			}
		}
		if ra.hasNonNull() {
			if vals[a].nn, val, ok = readVarint(val); !ok {
				return p.badValue(a)
			}
		}
	}
	if len(val) != 0 {
		return fmt.Errorf("decode aggregation state value: %d trailing bytes", len(val))
	}
	return nil
}

func readFloat(b []byte) (float64, []byte, bool) {
	if len(b) < 8 {
		return 0, b, false
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:], true
}

func readVarint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

func (p *plan) badValue(a int) error {
	return fmt.Errorf("decode aggregation state value: field %q truncated or malformed", p.aggs[a].As)
}

// merge folds the partial values of entry e into vals (the stored values).
func (pt *partial) merge(e int, vals []aggVal) (overflow int) {
	overflow = -1
	for a := range pt.p.aggs {
		ra := &pt.p.aggs[a]
		acc := &pt.acc[a]
		v := &vals[a]
		if ra.sketch != nil {
			acc.sketch.mergeInto(ra, e, v)
			continue
		}
		if ra.Kind == Count {
			v.i += acc.ints[e]
			continue
		}
		nn := acc.nn[e]
		if ra.acc().Kind() == stream.Decimal {
			if pt.mergeDec(ra, v, acc, e) && overflow < 0 {
				overflow = a
			}
			continue
		}
		if ra.Kind == Sum || ra.Kind == Avg {
			// With retractions a sum's partial may be non-zero with a net
			// non-null count of 0 (one value retracted, another inserted).
			if ra.acc().Storage() == stream.Float64 {
				v.f += acc.floats[e]
			} else {
				if addOverflows(v.i, acc.ints[e]) && overflow < 0 && (ra.Kind == Avg || !pt.p.spec.NonANSI) {
					overflow = a
				}
				v.i += acc.ints[e]
			}
			if v.nn += nn; v.nn == 0 {
				v.i, v.f = 0, 0 // every value retracted: SQL null, no float residue
			}
			continue
		}
		if nn == 0 {
			continue
		}
		if ra.acc().Storage() == stream.Float64 {
			x := acc.floats[e]
			switch ra.Kind {
			case Min:
				if v.nn == 0 || floatLess(x, v.f) {
					v.f = x
				}
			case Max:
				if v.nn == 0 || floatLess(v.f, x) {
					v.f = x
				}
			}
		} else {
			x := acc.ints[e]
			switch ra.Kind {
			case Min:
				if v.nn == 0 || x < v.i {
					v.i = x
				}
			case Max:
				if v.nn == 0 || x > v.i {
					v.i = x
				}
			}
		}
		v.nn += nn
	}
	return overflow
}

// mergeDec folds a decimal aggregate's partial value of entry e into v;
// true when a sum leaves its type's precision (ARITHMETIC_OVERFLOW: a
// decimal sum's overflow fails the batch in both ANSI modes here, where
// Spark without ANSI returns null; docs/contracts.md, Types).
func (pt *partial) mergeDec(ra *resolvedAgg, v *aggVal, acc *accum, e int) bool {
	nn := acc.nn[e]
	x := acc.decs[e]
	switch ra.Kind {
	case Sum, Avg:
		sum, ok := v.d.Add(x)
		v.d = sum
		if v.nn += nn; v.nn == 0 {
			v.d = stream.Dec128{}
		}
		return !ok || !sum.Fits(ra.acc().Precision()) || ra.Kind == Avg && v.nn > 0 && !avgFits(sum, v.nn, ra.in, ra.out)
	case Min:
		if nn > 0 && (v.nn == 0 || x.Cmp(v.d) < 0) {
			v.d = x
		}
	case Max:
		if nn > 0 && (v.nn == 0 || x.Cmp(v.d) > 0) {
			v.d = x
		}
	}
	v.nn += nn
	return false
}
