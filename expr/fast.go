package expr

// Fast paths for the functions a query evaluates on every row (a GROUP BY
// date_trunc, lower(substring(...))): they work on the typed slices
// directly, where rowFunc boxes each value.

// mapNode applies a function to each non-null value of one argument of
// the same kind: strings (s) or longs (i).
type mapNode struct {
	x   node
	t   Type
	s   func(string) string
	i   func(int64) int64
	src Expr
}

func (n *mapNode) typ() Type    { return n.t }
func (n *mapNode) source() Expr { return n.src }
func (n *mapNode) eval(c *ctx, sel []bool) (*vec, error) {
	x, err := n.x.eval(c, sel)
	if err != nil {
		return nil, err
	}
	out := newVec(n.t, c.n)
	out.nullsFrom(x)
	for r := 0; r < c.n; r++ {
		if out.null(r) {
			continue
		}
		if n.s != nil {
			out.s[r] = n.s(x.s[r])
		} else {
			out.i[r] = n.i(x.i[r])
		}
	}
	return out, nil
}

// constArg is the value of a literal argument (an INT or a STRING), false
// when the argument is not a literal.
func constArg(call Call, i int) (any, bool) {
	if i >= len(call.Args) {
		return nil, false
	}
	switch l := call.Args[i].(type) {
	case Lit:
		switch l.Kind {
		case LitInt:
			return l.Int, true
		case LitString:
			return l.Str, true
		}
	case Neg:
		if x, ok := l.X.(Lit); ok && x.Kind == LitInt {
			return -x.Int, true
		}
	}
	return nil, false
}

// asciiSubstring is substring for an ASCII string (bytes are characters).
func asciiSubstring(s string, pos, l int64) (string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return "", false
		}
	}
	n := int64(len(s))
	start := pos - 1
	switch {
	case pos < 0:
		start = n + pos
	case pos == 0:
		start = 0
	}
	end := start + l
	if l < 0 || end < start {
		return "", true
	}
	start, end = max(start, 0), min(end, n)
	if start >= end {
		return "", true
	}
	return s[start:end], true
}
