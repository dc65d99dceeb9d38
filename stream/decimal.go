package stream

import (
	"math/big"
	"math/bits"
	"strings"
)

// Dec128 is the unscaled value of a DECIMAL(p, s) as a 128-bit two's
// complement integer (Hi the signed high word, Lo the low word): the value
// is Dec128 / 10^s. 38 digits need 127 bits, so every decimal Spark holds
// fits. The zero value is 0.
type Dec128 struct {
	Hi int64
	Lo uint64
}

// Dec128Of is x as a Dec128.
func Dec128Of(x int64) Dec128 { return Dec128{Hi: x >> 63, Lo: uint64(x)} }

// Sign is -1, 0 or +1.
func (d Dec128) Sign() int {
	switch {
	case d.Hi < 0:
		return -1
	case d.Hi == 0 && d.Lo == 0:
		return 0
	}
	return 1
}

// Cmp compares d and o: -1, 0 or +1.
func (d Dec128) Cmp(o Dec128) int {
	switch {
	case d.Hi < o.Hi:
		return -1
	case d.Hi > o.Hi:
		return 1
	case d.Lo < o.Lo:
		return -1
	case d.Lo > o.Lo:
		return 1
	}
	return 0
}

// Add is d + o; ok is false when the sum leaves 128 bits.
func (d Dec128) Add(o Dec128) (Dec128, bool) {
	lo, carry := bits.Add64(d.Lo, o.Lo, 0)
	hi := d.Hi + o.Hi + int64(carry)
	// Signed overflow: both operands of one sign, the result of the other.
	ok := !((d.Hi >= 0) == (o.Hi >= 0) && (hi >= 0) != (d.Hi >= 0))
	return Dec128{Hi: hi, Lo: lo}, ok
}

// Neg is -d (the most negative value maps to itself, which no decimal of
// 38 digits reaches).
func (d Dec128) Neg() Dec128 {
	lo, borrow := bits.Sub64(0, d.Lo, 0)
	return Dec128{Hi: -d.Hi - int64(borrow), Lo: lo}
}

// Big is d as a big.Int.
func (d Dec128) Big() *big.Int {
	v := new(big.Int).SetInt64(d.Hi)
	v.Lsh(v, 64)
	return v.Or(v, new(big.Int).SetUint64(d.Lo))
}

// Dec128FromBig is v as a Dec128; ok is false when v needs more than 128
// bits.
func Dec128FromBig(v *big.Int) (Dec128, bool) {
	if v.BitLen() > 127 {
		return Dec128{}, false
	}
	neg := v.Sign() < 0
	a := new(big.Int).Abs(v)
	lo := a.Uint64()
	hi := new(big.Int).Rsh(a, 64).Uint64()
	d := Dec128{Hi: int64(hi), Lo: lo}
	if neg {
		d = d.Neg()
	}
	return d, true
}

// pow10Dec are 10^0 .. 10^38.
var pow10Dec = func() []Dec128 {
	out := make([]Dec128, MaxDecimalPrecision+1)
	v := big.NewInt(1)
	for i := range out {
		out[i], _ = Dec128FromBig(v)
		v.Mul(v, big.NewInt(10))
	}
	return out
}()

// Fits reports whether d has at most p digits (|d| < 10^p), the check of
// a value against DECIMAL(p, s).
func (d Dec128) Fits(p int) bool {
	if p >= len(pow10Dec) {
		return true
	}
	a := d
	if a.Sign() < 0 {
		a = a.Neg()
	}
	return a.Cmp(pow10Dec[p]) < 0
}

// Text renders d with scale s as Spark prints a decimal: plain notation,
// exactly s fractional digits ("-1.50", "0.007").
func (d Dec128) Text(s int) string {
	neg := d.Sign() < 0
	digits := ""
	if d.Hi == 0 {
		digits = uintText(d.Lo)
	} else {
		digits = new(big.Int).Abs(d.Big()).String()
	}
	if s > 0 {
		if len(digits) <= s {
			digits = strings.Repeat("0", s-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-s] + "." + digits[len(digits)-s:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

func uintText(x uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + x%10)
		x /= 10
		if x == 0 {
			break
		}
	}
	return string(b[i:])
}

// ParseDecimal reads a decimal literal ("-12.5", "3", "1e3", ".5") as the
// unscaled value of DECIMAL(p, s), rounding HALF_UP to s digits as Spark's
// cast does; ok is false for text that is no number or a value that does
// not fit p digits.
func ParseDecimal(text string, p, s int) (Dec128, bool) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(text))
	if !ok {
		return Dec128{}, false
	}
	return DecimalOfRat(r, p, s)
}

// DecimalOfRat is r as the unscaled value of DECIMAL(p, s), rounded
// HALF_UP (away from zero at a tie) to s digits; ok is false when it does
// not fit p digits.
func DecimalOfRat(r *big.Rat, p, s int) (Dec128, bool) {
	scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil)))
	num, den := scaled.Num(), scaled.Denom()
	q, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	if rem.Sign() != 0 {
		twice := new(big.Int).Abs(rem)
		twice.Lsh(twice, 1)
		if twice.Cmp(den) >= 0 {
			if num.Sign() < 0 {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		}
	}
	d, ok := Dec128FromBig(q)
	if !ok || !d.Fits(p) {
		return Dec128{}, false
	}
	return d, true
}

// AppendKey appends d's 16-byte order-preserving encoding: big-endian
// with the sign bit flipped, so bytes.Compare orders two encodings as Cmp
// orders the values.
func (d Dec128) AppendKey(dst []byte) []byte {
	hi := uint64(d.Hi) ^ 1<<63
	for i := 7; i >= 0; i-- {
		dst = append(dst, byte(hi>>(8*i)))
	}
	for i := 7; i >= 0; i-- {
		dst = append(dst, byte(d.Lo>>(8*i)))
	}
	return dst
}

// Dec128FromKey reads 16 bytes written by AppendKey.
func Dec128FromKey(b []byte) Dec128 {
	var hi, lo uint64
	for i := range 8 {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	return Dec128{Hi: int64(hi ^ 1<<63), Lo: lo}
}
