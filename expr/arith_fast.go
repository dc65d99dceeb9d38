package expr

import (
	"math/bits"

	"github.com/ethstream/ethstream/stream"
)

// The arithmetic's batch loops: DOUBLE + - * / and INT or BIGINT + - *
// over whole columns in typed loops of a block of rows at a time, where
// eval's per-row loop switches on the operator, calls a closure and
// materializes a literal operand and an implicit cast for every row (the
// transactions shape's fee, gas * price / 1e9, spent ~6.5 ms of the
// batch's one goroutine on a 131,072-row row group, most of it there). An
// integral operand of a DOUBLE one (a CAST that cannot fail, of a column
// or of INT or BIGINT arithmetic) is computed a block at a time beside it,
// not into a column of its own: a column of a row group is a megabyte of
// fresh memory to fault in.
//
// A batch loop computes every row, nulls included, and gives up when any
// row, live or null, would divide by zero or overflow: eval's per-row
// loop then computes the batch from the same operands and decides each
// such row as it always has (an error for a live row under ANSI, a null
// or a wrapped value otherwise). Without such a row that loop raises
// nothing and reads sel for nothing else, so both give the same values;
// the batch loop zeroes its null rows as the per-row loop leaves them.

// rowLoopsOnly turns the batch loops, and caseNode's first-arm shortcut,
// off: the tests' reference (TestBatchLoopsEqualRowLoops).
var rowLoopsOnly bool

// blockRows is how many rows a batch loop computes at once: small enough
// for its blocks to stay in L1, long enough to amortize the loop's setup.
const blockRows = 512

// fOperand is a DOUBLE operand of a batch loop: a column of doubles (f),
// one of integers read as doubles (i: a CAST that cannot fail), integral
// arithmetic read as doubles (x over xl and xr), or a non-null literal (c).
type fOperand struct {
	f      []float64
	i      []int64
	x      *arithNode
	xl, xr iOperand
	c      float64
	isC    bool
	v      *vec   // what f or i is from (nil: a literal or x)
	bad    uint64 // x overflowed (its sign bit)
	ib     [blockRows]int64
}

// block is the operand's rows lo..hi, in buf when they are computed.
func (o *fOperand) block(lo, hi int, buf *[blockRows]float64) []float64 {
	switch {
	case o.isC:
		return buf[:hi-lo] // filled with c once
	case o.f != nil:
		return o.f[lo:hi]
	}
	var src []int64
	if o.x != nil {
		src = o.ib[:hi-lo]
		o.bad |= o.x.intBlock(o.xl.block(lo, hi), o.xr.block(lo, hi), src)
	} else {
		src = o.i[lo:hi]
	}
	b := buf[:len(src)]
	for k, v := range src {
		b[k] = float64(v)
	}
	return b
}

// nulls are the vectors whose nulls are the operand's.
func (o *fOperand) nulls() []*vec {
	if o.x != nil {
		return []*vec{o.xl.v, o.xr.v}
	}
	return []*vec{o.v}
}

// iOperand is an INT or BIGINT operand: a column (i) or a non-null
// literal (c, broadcast into cb).
type iOperand struct {
	i   []int64
	c   int64
	isC bool
	v   *vec
	cb  *[blockRows]int64
}

func (o *iOperand) block(lo, hi int) []int64 {
	if o.isC {
		if o.cb == nil {
			o.cb = new([blockRows]int64)
			fill(o.cb[:], o.c)
		}
		return o.cb[:hi-lo]
	}
	return o.i[lo:hi]
}

// literalOf is n's value when it is a non-null literal, or a CAST of one
// to DOUBLE or BIGINT (which cannot fail).
func literalOf(n node) (*constNode, bool) {
	switch x := n.(type) {
	case *constNode:
		return x, !x.null
	case *castNode:
		k, ok := x.x.(*constNode)
		if !ok || k.null || !k.t.integral() {
			return nil, false
		}
		switch x.to.Kind {
		case stream.Float64:
			return &constNode{t: x.to, f: float64(k.i)}, true
		case stream.Int64:
			return &constNode{t: x.to, i: k.i}, true
		}
	}
	return nil, false
}

// doubleOperand evaluates n as a DOUBLE operand; a CAST of an integral
// value to DOUBLE is read through, and integral arithmetic under it is
// left to the blocks when fuse (its overflow, raised by the row loop
// after the batch loop gave up, then comes before any error the other
// operand's evaluation could raise: the other is a literal, or was
// evaluated first).
func doubleOperand(c *ctx, n node, sel []bool, fuse bool) (*fOperand, error) {
	if k, ok := literalOf(n); ok {
		return &fOperand{c: k.f, isC: true}, nil
	}
	if x, ok := n.(*castNode); ok && x.to.Kind == stream.Float64 && x.x.typ().integral() {
		if a, ok := x.x.(*arithNode); ok && fuse && a.batchable() {
			l, err := integralOperand(c, a.l, sel)
			if err != nil {
				return nil, err
			}
			r, err := integralOperand(c, a.r, sel)
			if err != nil {
				return nil, err
			}
			return &fOperand{x: a, xl: l, xr: r}, nil
		}
		v, err := x.x.eval(c, sel)
		if err != nil {
			return nil, err
		}
		return &fOperand{i: v.i, v: v}, nil
	}
	v, err := n.eval(c, sel)
	if err != nil {
		return nil, err
	}
	return &fOperand{f: v.f, v: v}, nil
}

// vec is the operand as eval's row loop takes it: n's value, from what
// doubleOperand evaluated (the arithmetic by its own row loop, a cast as
// castNode.eval makes it).
func (o *fOperand) vec(c *ctx, n node, sel []bool) (*vec, error) {
	switch {
	case o.isC:
		return n.eval(c, sel)
	case o.f != nil || (o.x == nil && o.v.t == Double):
		return o.v, nil
	}
	x := o.v
	if o.x != nil {
		var err error
		if x, err = o.x.rows(c, sel, o.xl.vec(c, o.x.l, sel), o.xr.vec(c, o.x.r, sel)); err != nil {
			return nil, err
		}
	}
	out := newVec(Double, c.n)
	out.nullsFrom(x)
	fastCast(x, out, x.t, Double)
	return out, nil
}

// integralOperand evaluates n as an INT or BIGINT operand.
func integralOperand(c *ctx, n node, sel []bool) (iOperand, error) {
	if k, ok := literalOf(n); ok {
		return iOperand{c: k.i, isC: true}, nil
	}
	v, err := n.eval(c, sel)
	if err != nil {
		return iOperand{}, err
	}
	return iOperand{i: v.i, v: v}, nil
}

// vec is the operand as eval's row loop takes it (a literal's constNode
// cannot fail).
func (o *iOperand) vec(c *ctx, n node, sel []bool) *vec {
	if o.isC {
		v, _ := n.eval(c, sel)
		return v
	}
	return o.v
}

// batchable reports whether n has a batch loop: DOUBLE + - * / over
// DOUBLE operands, INT or BIGINT + - * over operands of its type.
func (n *arithNode) batchable() bool {
	if n.interval || n.r == nil {
		return false
	}
	switch n.t {
	case Double:
		return (n.op == "+" || n.op == "-" || n.op == "*" || n.op == "/") &&
			n.l.typ() == Double && n.r.typ() == Double
	case Int, BigInt:
		return (n.op == "+" || n.op == "-" || n.op == "*") && n.l.typ() == n.t && n.r.typ() == n.t
	}
	return false
}

// evalBatch is eval by a batch loop. When a row needs eval's row loop
// (see above) out is nil and l and r are the operands for it, each
// evaluated once; an operand's error is returned as eval returns it.
func (n *arithNode) evalBatch(c *ctx, sel []bool) (out, l, r *vec, err error) {
	if n.t == Double {
		_, rLit := literalOf(n.r)
		lo, err := doubleOperand(c, n.l, sel, rLit)
		if err != nil {
			return nil, nil, nil, err
		}
		ro, err := doubleOperand(c, n.r, sel, true)
		if err != nil {
			return nil, nil, nil, err
		}
		out = newVec(n.t, c.n)
		if n.doubles(lo, ro, out.f) {
			return finishBatch(out, append(lo.nulls(), ro.nulls()...)), nil, nil, nil
		}
		if l, err = lo.vec(c, n.l, sel); err != nil {
			return nil, nil, nil, err
		}
		r, err = ro.vec(c, n.r, sel)
		return nil, l, r, err
	}
	lo, err := integralOperand(c, n.l, sel)
	if err != nil {
		return nil, nil, nil, err
	}
	ro, err := integralOperand(c, n.r, sel)
	if err != nil {
		return nil, nil, nil, err
	}
	out = newVec(n.t, c.n)
	var bad uint64
	for b := 0; b < c.n; b += blockRows {
		e := min(b+blockRows, c.n)
		bad |= n.intBlock(lo.block(b, e), ro.block(b, e), out.i[b:e])
	}
	if bad>>63 == 0 {
		return finishBatch(out, []*vec{lo.v, ro.v}), nil, nil, nil
	}
	return nil, lo.vec(c, n.l, sel), ro.vec(c, n.r, sel), nil
}

// finishBatch gives out the nulls of ins (nil: a literal), its null rows
// zero.
func finishBatch(out *vec, ins []*vec) *vec {
	for _, in := range ins {
		if in != nil {
			out.nullsFrom(in)
		}
	}
	if out.valid != nil {
		for row, ok := range out.valid {
			if !ok {
				if out.f != nil {
					out.f[row] = 0
				} else {
					out.i[row] = 0
				}
			}
		}
	}
	return out
}

// doubles computes out = l op r; false on a division by zero or an
// overflow of an integral operand.
func (n *arithNode) doubles(l, r *fOperand, out []float64) bool {
	var lb, rb [blockRows]float64
	if l.isC {
		fill(lb[:], l.c)
	}
	if r.isC {
		fill(rb[:], r.c)
	}
	for lo := 0; lo < len(out); lo += blockRows {
		hi := min(lo+blockRows, len(out))
		o := out[lo:hi]
		x := l.block(lo, hi, &lb)[:len(o)]
		y := r.block(lo, hi, &rb)[:len(o)]
		switch n.op {
		case "+":
			for k := range o {
				o[k] = x[k] + y[k]
			}
		case "-":
			for k := range o {
				o[k] = x[k] - y[k]
			}
		case "*":
			for k := range o {
				o[k] = x[k] * y[k]
			}
		case "/":
			zero := false
			for k := range o {
				if y[k] == 0 {
					zero = true
				}
				o[k] = x[k] / y[k]
			}
			if zero {
				return false
			}
		}
	}
	return (l.bad|r.bad)>>63 == 0
}

// intBlock computes o = x op y in two's complement and returns a value
// whose sign bit is set when a row overflows n's type (BIGINT, or INT's
// 32 bits).
func (n *arithNode) intBlock(x, y, o []int64) (bad uint64) {
	x, y = x[:len(o)], y[:len(o)]
	switch n.op {
	case "+":
		for k := range o {
			a, b := x[k], y[k]
			v := a + b
			o[k] = v
			bad |= uint64((v ^ a) & (v ^ b)) // the sum's sign is neither operand's
		}
	case "-":
		for k := range o {
			a, b := x[k], y[k]
			v := a - b
			o[k] = v
			bad |= uint64((a ^ b) & (a ^ v))
		}
	case "*":
		for k := range o {
			a, b := x[k], y[k]
			hi, lo := bits.Mul64(uint64(a), uint64(b))
			// The signed product's high word: the unsigned one less b
			// when a is negative and a when b is.
			hi -= uint64(a>>63)&uint64(b) + uint64(b>>63)&uint64(a)
			o[k] = int64(lo)
			// Fits in 64 bits when the high word is the low word's sign.
			if hi != uint64(int64(lo)>>63) {
				bad |= 1 << 63
			}
		}
	}
	if n.t == Int {
		for _, v := range o {
			if v != int64(int32(v)) {
				bad |= 1 << 63
			}
		}
	}
	return bad
}

func fill[T any](b []T, v T) {
	for k := range b {
		b[k] = v
	}
}
