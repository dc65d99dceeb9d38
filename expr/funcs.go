package expr

import (
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// rowFunc is a scalar function computed row by row over Go values (as get
// returns them). A strict function is null when an argument is; f returns
// nil for a null result, and an error only for a row that is used.
type rowFunc struct {
	name   string
	args   []node
	t      Type
	strict bool
	f      func(c *ctx, a []any) (any, error)
	src    Expr
}

func (n *rowFunc) typ() Type    { return n.t }
func (n *rowFunc) source() Expr { return n.src }
func (n *rowFunc) eval(c *ctx, sel []bool) (*vec, error) {
	vals := make([]*vec, len(n.args))
	for i, a := range n.args {
		v, err := a.eval(c, sel)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	out := newVec(n.t, c.n)
	a := make([]any, len(vals))
	for r := 0; r < c.n; r++ {
		null := false
		for i, v := range vals {
			a[i] = get(v, r)
			null = null || a[i] == nil
		}
		if null && n.strict {
			out.setNull(r)
			continue
		}
		x, err := n.f(c, a)
		if err != nil {
			if live(sel, r) {
				return nil, err
			}
			x = nil
		}
		set(out, r, x)
	}
	return out, nil
}

// funcSpec types a call: it returns the node, or an error naming the
// call. args are compiled already.
type funcSpec struct {
	min, max int // argument count; max -1 is variadic
	build    func(c *compiler, call Call, args []node) (node, error)
}

// functions are the scalar functions by name. init fills it (the table
// refers to helpers that use it).
var functions map[string]funcSpec

// FunctionNames lists the scalar functions, sorted, for errors and docs.
func FunctionNames() []string {
	var out []string
	for k := range functions {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (c *compiler) call(x Call) (node, error) {
	spec, ok := functions[x.Name]
	if !ok {
		return nil, errcode.New(CodeUnresolvedRoutine, "", "use one of the functions ethstream has: "+strings.Join(FunctionNames(), ", "),
			"cannot resolve routine %s: ethstream has no function %s", x.Name, x.Name)
	}
	if x.Star || x.Distinct || x.Filter != nil {
		return nil, mismatch(x, "%s is not an aggregate function", x.Name)
	}
	if len(x.Args) < spec.min || spec.max >= 0 && len(x.Args) > spec.max {
		want := strconv.Itoa(spec.min)
		switch {
		case spec.max < 0:
			want = "at least " + want
		case spec.max != spec.min:
			want += " to " + strconv.Itoa(spec.max)
		}
		return nil, errcode.New("WRONG_NUM_ARGS", "", "pass "+want+" arguments",
			"the function %s requires %s parameters but the actual number is %d", x.Name, want, len(x.Args))
	}
	args := make([]node, len(x.Args))
	for i, a := range x.Args {
		n, err := c.compile(a)
		if err != nil {
			return nil, err
		}
		args[i] = n
	}
	return spec.build(c, x, args)
}

// want casts each argument to the given type (Spark's
// ImplicitCastInputTypes), refusing what cannot be cast implicitly.
func want(call Call, args []node, types ...Type) ([]node, error) {
	out := make([]node, len(args))
	for i, a := range args {
		t := types[min(i, len(types)-1)]
		at := a.typ()
		ok := at == t || at == Null || implicit(at, t)
		if !ok {
			return nil, mismatch(call, "argument %d requires %s, not %s", i+1, t, at)
		}
		out[i] = to(a, t)
	}
	return out, nil
}

// implicit reports whether Spark casts from to to without being asked:
// among numbers by widening, anything atomic to STRING for a string
// function, STRING to a date or timestamp, DATE to TIMESTAMP and back.
func implicit(from, to Type) bool {
	switch {
	case from.IsArray() || to.IsArray():
		return false
	case to == String:
		return from != intervalType
	case to.numeric() && from.numeric():
		if to.Kind == stream.Float64 || to.Kind == stream.Decimal {
			return true
		}
		return from.integral() && (to.Kind == stream.Int64 || from.Kind == stream.Int32)
	case to == Timestamp || to == Date:
		return from == String || from == Date || from == Timestamp
	case to.numeric() && from == String:
		return true
	}
	return false
}

func strict(name string, t Type, args []node, call Call, f func(c *ctx, a []any) (any, error)) node {
	return &rowFunc{name: name, args: args, t: t, strict: true, f: f, src: call}
}

// stringMap builds a one-argument string function on the fast path.
func stringMap(f func(string) string) func(*compiler, Call, []node) (node, error) {
	return func(_ *compiler, call Call, args []node) (node, error) {
		a, err := want(call, args, String)
		if err != nil {
			return nil, err
		}
		return &mapNode{x: a[0], t: String, s: f, src: call}, nil
	}
}

// stringFn builds a strict function of string arguments.
func stringFn(t Type, f func(a []any) any, types ...Type) func(*compiler, Call, []node) (node, error) {
	return func(_ *compiler, call Call, args []node) (node, error) {
		if len(types) == 0 {
			types = []Type{String}
		}
		a, err := want(call, args, types...)
		if err != nil {
			return nil, err
		}
		return strict(call.Name, t, a, call, func(_ *ctx, v []any) (any, error) { return f(v), nil }), nil
	}
}

func init() {
	functions = map[string]funcSpec{
		"lower": {1, 1, stringMap(strings.ToLower)},
		"upper": {1, 1, stringMap(strings.ToUpper)},
		"length": {1, 1, stringFn(Int, func(a []any) any {
			return int64(utf8.RuneCountInString(a[0].(string)))
		})},
		"substring": {2, 3, substringFn},
		"concat": {0, -1, stringFn(String, func(a []any) any {
			var b strings.Builder
			for _, s := range a {
				b.WriteString(s.(string))
			}
			return b.String()
		})},
		"concat_ws": {1, -1, func(_ *compiler, call Call, args []node) (node, error) {
			a, err := want(call, args, String)
			if err != nil {
				return nil, err
			}
			return &rowFunc{name: call.Name, args: a, t: String, src: call, f: func(_ *ctx, v []any) (any, error) {
				if v[0] == nil {
					return nil, nil
				}
				var parts []string
				for _, s := range v[1:] {
					if s != nil {
						parts = append(parts, s.(string))
					}
				}
				return strings.Join(parts, v[0].(string)), nil
			}}, nil
		}},
		"trim":  {1, 1, stringMap(func(s string) string { return strings.Trim(s, " ") })},
		"ltrim": {1, 1, stringMap(func(s string) string { return strings.TrimLeft(s, " ") })},
		"rtrim": {1, 1, stringMap(func(s string) string { return strings.TrimRight(s, " ") })},
		"lpad":  {2, 3, stringFn(String, func(a []any) any { return pad(a, true) }, String, Int, String)},
		"rpad":  {2, 3, stringFn(String, func(a []any) any { return pad(a, false) }, String, Int, String)},
		"starts_with": {2, 2, stringFn(Boolean, func(a []any) any {
			return strings.HasPrefix(a[0].(string), a[1].(string))
		})},
		"ends_with": {2, 2, stringFn(Boolean, func(a []any) any {
			return strings.HasSuffix(a[0].(string), a[1].(string))
		})},
		"contains": {2, 2, stringFn(Boolean, func(a []any) any {
			return strings.Contains(a[0].(string), a[1].(string))
		})},
		"replace": {2, 3, stringFn(String, func(a []any) any {
			if a[1].(string) == "" {
				return a[0]
			}
			with := ""
			if len(a) > 2 {
				with = a[2].(string)
			}
			return strings.ReplaceAll(a[0].(string), a[1].(string), with)
		})},
		"regexp_extract": {2, 3, regexpExtract},
		"hex":            {1, 1, hexFn},
		"conv":           {3, 3, convFn},
		"abs":            {1, 1, absFn},
		"round":          {1, 2, roundFn(false)},
		"bround":         {1, 2, roundFn(true)},
		"floor":          {1, 1, floorCeil(math.Floor, false)},
		"ceil":           {1, 1, floorCeil(math.Ceil, true)},
		"pow":            {2, 2, doubleFn(func(a ...float64) (float64, bool) { return math.Pow(a[0], a[1]), true })},
		"sqrt":           {1, 1, doubleFn(func(a ...float64) (float64, bool) { return math.Sqrt(a[0]), true })},
		"exp":            {1, 1, doubleFn(func(a ...float64) (float64, bool) { return math.Exp(a[0]), true })},
		"ln":             {1, 1, doubleFn(func(a ...float64) (float64, bool) { return math.Log(a[0]), a[0] > 0 })},
		"log10":          {1, 1, doubleFn(func(a ...float64) (float64, bool) { return math.Log10(a[0]), a[0] > 0 })},
		"greatest":       {2, -1, extreme(1)},
		"least":          {2, -1, extreme(-1)},
		"coalesce":       {1, -1, coalesceFn},
		"nvl":            {2, 2, coalesceFn},
		"if":             {3, 3, ifFn},
		"nullif":         {2, 2, nullifFn},
		"try_add":        {2, 2, tryArith("+")},
		"try_subtract":   {2, 2, tryArith("-")},
		"try_multiply":   {2, 2, tryArith("*")},
		"try_divide":     {2, 2, tryArith("/")},
		"like":           {2, 2, likeFn("like")},
		"rlike":          {2, 2, likeFn("rlike")},
	}
	alias := map[string]string{"substr": "substring", "char_length": "length", "character_length": "length",
		"startswith": "starts_with", "endswith": "ends_with", "power": "pow", "ceiling": "ceil", "ifnull": "nvl",
		"regexp_like": "rlike", "regexp": "rlike"}
	for a, f := range alias {
		functions[a] = functions[f]
	}
	addDatetime()
	addArrays()
}

// substringFn is substring(str, pos[, len]); with literal positions it
// runs on the fast path.
func substringFn(c *compiler, call Call, args []node) (node, error) {
	pos, ok1 := constArg(call, 1)
	l, ok2 := any(int64(math.MaxInt32)), true
	if len(call.Args) > 2 {
		l, ok2 = constArg(call, 2)
	}
	p, isInt1 := pos.(int64)
	n, isInt2 := l.(int64)
	if ok1 && ok2 && isInt1 && isInt2 {
		a, err := want(call, args[:1], String)
		if err != nil {
			return nil, err
		}
		return &mapNode{x: a[0], t: String, src: call, s: func(s string) string {
			if out, ok := asciiSubstring(s, p, n); ok {
				return out
			}
			return substring(s, p, n)
		}}, nil
	}
	return stringFn(String, func(a []any) any {
		l := int64(math.MaxInt32)
		if len(a) > 2 {
			l = a[2].(int64)
		}
		return substring(a[0].(string), a[1].(int64), l)
	}, String, Int, Int)(c, call, args)
}

// substring is Spark's 1-based substring: a negative pos counts from the
// end, 0 is 1; characters, not bytes.
func substring(s string, pos, l int64) string {
	rs := []rune(s)
	n := int64(len(rs))
	start := pos - 1
	switch {
	case pos > 0:
	case pos < 0:
		start = n + pos
	default:
		start = 0
	}
	end := start + l
	if l < 0 || end < start {
		return ""
	}
	start = max(start, 0)
	end = min(end, n)
	if start >= end {
		return ""
	}
	return string(rs[start:end])
}

func pad(a []any, left bool) any {
	s, l := []rune(a[0].(string)), int(a[1].(int64))
	p := []rune(" ")
	if len(a) > 2 {
		p = []rune(a[2].(string))
	}
	if l <= 0 {
		return ""
	}
	if len(s) >= l {
		return string(s[:l])
	}
	if len(p) == 0 {
		return string(s)
	}
	fill := make([]rune, 0, l-len(s))
	for len(fill) < l-len(s) {
		fill = append(fill, p[len(fill)%len(p)])
	}
	if left {
		return string(fill) + string(s)
	}
	return string(s) + string(fill)
}

func regexpExtract(_ *compiler, call Call, args []node) (node, error) {
	a, err := want(call, args, String, String, Int)
	if err != nil {
		return nil, err
	}
	cache := map[string]*regexp.Regexp{}
	return strict(call.Name, String, a, call, func(c *ctx, v []any) (any, error) {
		re, ok := cache[v[1].(string)]
		if !ok {
			var err error
			if re, err = regexp.Compile(v[1].(string)); err != nil {
				return nil, errcode.New(CodeInvalidArgument, "", "fix the regular expression", "%s: %v", call, err)
			}
			cache[v[1].(string)] = re
		}
		idx := int64(1)
		if len(v) > 2 {
			idx = v[2].(int64)
		}
		if idx < 0 || idx > int64(re.NumSubexp()) {
			return nil, errcode.New(CodeInvalidArgument, "", "use a group index between 0 and the regex's group count",
				"%s: the regex has %d groups, but the index is %d", call, re.NumSubexp(), idx)
		}
		m := re.FindStringSubmatch(v[0].(string))
		if m == nil {
			return "", nil
		}
		return m[idx], nil
	}), nil
}

// hexFn is hex(): a number's two's complement in upper-case hex (Java's
// Long.toHexString), a string's UTF-8 bytes.
func hexFn(_ *compiler, call Call, args []node) (node, error) {
	t := args[0].typ()
	if t.integral() || t == Null {
		return strict(call.Name, String, []node{to(args[0], BigInt)}, call, func(_ *ctx, v []any) (any, error) {
			return strings.ToUpper(strconv.FormatUint(uint64(v[0].(int64)), 16)), nil
		}), nil
	}
	a, err := want(call, args, String)
	if err != nil {
		return nil, err
	}
	return strict(call.Name, String, a, call, func(_ *ctx, v []any) (any, error) {
		return strings.ToUpper(hexString(v[0].(string))), nil
	}), nil
}

func hexString(s string) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		b = append(b, digits[s[i]>>4], digits[s[i]&15])
	}
	return string(b)
}

// convFn is conv(num, from_base, to_base): the leading digits valid in
// from_base read as an unsigned 64-bit number (a leading '-' negates it in
// two's complement), written in |to_base| (signed when to_base < 0), upper
// case. Out of 64 bits is ARITHMETIC_OVERFLOW under ANSI and saturates
// otherwise, as Spark's NumberConverter.
func convFn(_ *compiler, call Call, args []node) (node, error) {
	a, err := want(call, args, String, Int, Int)
	if err != nil {
		return nil, err
	}
	return strict(call.Name, String, a, call, func(c *ctx, v []any) (any, error) {
		s, from, toBase := strings.TrimSpace(v[0].(string)), v[1].(int64), v[2].(int64)
		if from < 2 || from > 36 || abs(toBase) < 2 || abs(toBase) > 36 {
			return nil, nil
		}
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var u uint64
		ovf := false
		for _, ch := range strings.ToLower(s) {
			d := strings.IndexRune("0123456789abcdefghijklmnopqrstuvwxyz", ch)
			if d < 0 || int64(d) >= from {
				break
			}
			hi, lo := mulAdd(u, uint64(from), uint64(d))
			if hi {
				ovf = true
				break
			}
			u = lo
		}
		if ovf {
			if c.ansi {
				return nil, overflow(call, "conv")
			}
			u = math.MaxUint64
		}
		if neg {
			u = -u
		}
		if toBase < 0 && int64(u) < 0 {
			return "-" + strings.ToUpper(strconv.FormatUint(uint64(-int64(u)), int(-toBase))), nil
		}
		return strings.ToUpper(strconv.FormatUint(u, int(abs(toBase)))), nil
	}), nil
}

func abs(a int64) int64 {
	if a < 0 {
		return -a
	}
	return a
}

// mulAdd is u*m + d, and whether it left 64 bits.
func mulAdd(u, m, d uint64) (bool, uint64) {
	r := new(big.Int).SetUint64(u)
	r.Mul(r, new(big.Int).SetUint64(m))
	r.Add(r, new(big.Int).SetUint64(d))
	if !r.IsUint64() {
		return true, 0
	}
	return false, r.Uint64()
}

func absFn(_ *compiler, call Call, args []node) (node, error) {
	t := args[0].typ()
	if t == Null {
		t = Double
	}
	if !t.numeric() {
		return nil, mismatch(call, "abs takes a number, not %s", t)
	}
	return strict(call.Name, t, []node{to(args[0], t)}, call, func(c *ctx, v []any) (any, error) {
		switch x := v[0].(type) {
		case float64:
			return math.Abs(x), nil
		case *big.Int:
			return new(big.Int).Abs(x), nil
		case int64:
			lim := int64(math.MinInt64)
			if t == Int {
				lim = math.MinInt32
			}
			if x == lim {
				if c.ansi {
					return nil, overflow(call, strings.ToLower(t.String()))
				}
				return x, nil
			}
			return abs(x), nil
		}
		return nil, nil
	}), nil
}

// literalInt is an argument that must be a constant integer (round's
// scale), with its value.
func literalInt(call Call, i int) (int64, error) {
	if i >= len(call.Args) {
		return 0, nil
	}
	switch x := call.Args[i].(type) {
	case Lit:
		if x.Kind == LitInt {
			return x.Int, nil
		}
	case Neg:
		if l, ok := x.X.(Lit); ok && l.Kind == LitInt {
			return -l.Int, nil
		}
	}
	return 0, mismatch(call, "the scale must be an integer literal")
}

// roundFn is round (HALF_UP) or bround (HALF_EVEN) to d decimal places.
// A double rounds its shortest decimal text, as Spark's BigDecimal(x) does.
func roundFn(even bool) func(*compiler, Call, []node) (node, error) {
	return func(_ *compiler, call Call, args []node) (node, error) {
		d, err := literalInt(call, 1)
		if err != nil {
			return nil, err
		}
		t := args[0].typ()
		if t == Null {
			t = Double
		}
		if !t.numeric() {
			return nil, mismatch(call, "%s takes a number, not %s", call.Name, t)
		}
		out := t
		if t.Kind == stream.Decimal {
			intDigits := int(t.P) - int(t.S) + 1
			if d < 0 {
				out = Decimal(max(intDigits, 1-int(d)), 0)
			} else {
				ns := min(int(t.S), int(d))
				out = Decimal(min(intDigits+ns, MaxPrecision), ns)
			}
		}
		return strict(call.Name, out, []node{to(args[0], t)}, call, func(c *ctx, v []any) (any, error) {
			switch x := v[0].(type) {
			case float64:
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return x, nil
				}
				r, _ := new(big.Rat).SetString(strconv.FormatFloat(x, 'g', -1, 64))
				f, _ := roundRat(r, d, even).Float64()
				return f, nil
			case int64:
				if d >= 0 {
					return x, nil
				}
				q := roundRat(new(big.Rat).SetInt64(x), d, even)
				if !q.IsInt() || !q.Num().IsInt64() || t == Int && (q.Num().Int64() > math.MaxInt32 || q.Num().Int64() < math.MinInt32) {
					if c.ansi {
						return nil, overflow(call, strings.ToLower(t.String()))
					}
					return nil, nil
				}
				return q.Num().Int64(), nil
			case *big.Int:
				q := roundRat(new(big.Rat).SetFrac(x, pow10[t.S]), d, even)
				u := new(big.Int).Mul(q.Num(), pow10[out.S])
				u.Quo(u, q.Denom())
				if !fits(u, out.P) {
					if c.ansi {
						return nil, outOfRange(call, u, out)
					}
					return nil, nil
				}
				return u, nil
			}
			return nil, nil
		}), nil
	}
}

// roundRat rounds r to d decimal places (d < 0: to tens, hundreds...).
func roundRat(r *big.Rat, d int64, even bool) *big.Rat {
	scale := new(big.Rat).SetInt(pow10[abs(d)])
	x := new(big.Rat).Set(r)
	if d >= 0 {
		x.Mul(x, scale)
	} else {
		x.Quo(x, scale)
	}
	q, m := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	twice := new(big.Int).Abs(m)
	twice.Lsh(twice, 1)
	switch c := twice.Cmp(x.Denom()); {
	case c > 0, c == 0 && (!even || q.Bit(0) == 1):
		if x.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	out := new(big.Rat).SetInt(q)
	if d >= 0 {
		return out.Quo(out, scale)
	}
	return out.Mul(out, scale)
}

// floorCeil is floor or ceil: BIGINT for integers and doubles (a double
// out of range saturates, as Java's Math.floor(x).toLong), DECIMAL(p-s+1,
// 0) for a decimal.
func floorCeil(f func(float64) float64, up bool) func(*compiler, Call, []node) (node, error) {
	return func(_ *compiler, call Call, args []node) (node, error) {
		t := args[0].typ()
		if t == Null {
			t = Double
		}
		switch {
		case t.Kind == stream.Decimal:
			out := Decimal(min(int(t.P)-int(t.S)+1, MaxPrecision), 0)
			return strict(call.Name, out, args, call, func(_ *ctx, v []any) (any, error) {
				q, m := new(big.Int).DivMod(v[0].(*big.Int), pow10[t.S], new(big.Int)) // Euclidean: floor
				if up && m.Sign() != 0 {
					q.Add(q, big.NewInt(1))
				}
				return q, nil
			}), nil
		case t.integral():
			return to(args[0], BigInt), nil
		case t == Double:
			return strict(call.Name, BigInt, args, call, func(_ *ctx, v []any) (any, error) {
				x, _ := fromDouble(f(v[0].(float64)), BigInt, false)
				return x, nil
			}), nil
		}
		return nil, mismatch(call, "%s takes a number, not %s", call.Name, t)
	}
}

// doubleFn is a math function over doubles; ok false is a null result
// (ln of a non-positive number).
func doubleFn(f func(a ...float64) (float64, bool)) func(*compiler, Call, []node) (node, error) {
	return func(_ *compiler, call Call, args []node) (node, error) {
		a, err := want(call, args, Double)
		if err != nil {
			return nil, err
		}
		return strict(call.Name, Double, a, call, func(_ *ctx, v []any) (any, error) {
			fs := make([]float64, len(v))
			for i := range v {
				fs[i] = v[i].(float64)
			}
			r, ok := f(fs...)
			if !ok {
				return nil, nil
			}
			return r, nil
		}), nil
	}
}

// extreme is greatest (sign 1) or least (-1): nulls skipped, null when
// all are.
func extreme(sign int) func(*compiler, Call, []node) (node, error) {
	return func(_ *compiler, call Call, args []node) (node, error) {
		t, err := common(call, args)
		if err != nil {
			return nil, err
		}
		a := make([]node, len(args))
		for i := range args {
			a[i] = to(args[i], t)
		}
		return &rowFunc{name: call.Name, args: a, t: t, src: call, f: func(_ *ctx, v []any) (any, error) {
			var best any
			for _, x := range v {
				if x == nil {
					continue
				}
				if best == nil || compareAny(x, best, t)*sign > 0 {
					best = x
				}
			}
			return best, nil
		}}, nil
	}
}

func compareAny(a, b any, t Type) int {
	va, vb := newVec(t, 1), newVec(t, 1)
	set(va, 0, a)
	set(vb, 0, b)
	return compareAt(va, vb, 0)
}

func coalesceFn(c *compiler, call Call, _ []node) (node, error) {
	cs := Case{}
	for _, a := range call.Args[:len(call.Args)-1] {
		cs.Whens = append(cs.Whens, When{Cond: IsNull{X: a, Neg: true}, Then: a})
	}
	cs.Else = call.Args[len(call.Args)-1]
	return c.compile(cs)
}

func ifFn(c *compiler, call Call, _ []node) (node, error) {
	return c.compile(Case{Whens: []When{{Cond: call.Args[0], Then: call.Args[1]}}, Else: call.Args[2]})
}

func nullifFn(c *compiler, call Call, args []node) (node, error) {
	n, err := c.compile(Case{Whens: []When{{Cond: Cmp{Op: Eq, L: call.Args[0], R: call.Args[1]}, Then: Lit{Kind: LitNull}}}, Else: call.Args[0]})
	if err != nil {
		return nil, err
	}
	return n, nil
}

func tryArith(op string) func(*compiler, Call, []node) (node, error) {
	return func(c *compiler, call Call, _ []node) (node, error) {
		n, err := c.arith(Arith{Op: op, L: call.Args[0], R: call.Args[1]})
		if err != nil {
			return nil, err
		}
		if a, ok := n.(*arithNode); ok {
			a.try, a.src = true, call
		}
		return n, nil
	}
}

func likeFn(op string) func(*compiler, Call, []node) (node, error) {
	return func(c *compiler, call Call, _ []node) (node, error) {
		return c.like(Like{Op: op, X: call.Args[0], Pattern: call.Args[1]})
	}
}

// compilePattern compiles a LIKE pattern (% any run, _ one character, \
// escapes the next character; Spark's default escape) or an RLIKE
// regular expression (Java's syntax; Go's RE2 differs in backreferences
// and lookaround, which it refuses).
func compilePattern(op, pat string, e Expr) (func(string) bool, error) {
	if op == "rlike" {
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil, errcode.New(CodeInvalidArgument, "", "fix the regular expression (RE2 syntax: no backreferences or lookaround)", "%s: %v", e, err)
		}
		return re.MatchString, nil
	}
	var b strings.Builder
	b.WriteString("(?s)^")
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		switch ch := rs[i]; ch {
		case '\\':
			if i+1 == len(rs) {
				return nil, errcode.New(CodeInvalidArgument, "", "end the pattern with \\\\ for a literal backslash", "the pattern %q of %s ends with the escape character", pat, e)
			}
			nx := rs[i+1]
			if nx != '_' && nx != '%' && nx != '\\' {
				return nil, errcode.New(CodeInvalidArgument, "", "escape only _, % or \\", "the escape character is not allowed to precede %q in pattern %q of %s", nx, pat, e)
			}
			b.WriteString(regexp.QuoteMeta(string(nx)))
			i++
		case '%':
			b.WriteString(".*")
		case '_':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	b.WriteString("$")
	re := regexp.MustCompile(b.String())
	return re.MatchString, nil
}
