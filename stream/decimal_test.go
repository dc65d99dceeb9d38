package stream

import (
	"bytes"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// randDec draws a Dec128 of up to 38 digits, often near the limits.
func randDec(r *rand.Rand) *big.Int {
	digits := r.IntN(39)
	v := new(big.Int)
	for range digits {
		v.Mul(v, big.NewInt(10))
		v.Add(v, big.NewInt(r.Int64N(10)))
	}
	if r.IntN(2) == 0 {
		v.Neg(v)
	}
	return v
}

// TestDec128AgainstBig checks Add, Neg, Cmp, Fits, Text and the key
// encoding against math/big.
func TestDec128AgainstBig(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lim := new(big.Int).Lsh(big.NewInt(1), 127)
	for range 20000 {
		a, b := randDec(r), randDec(r)
		if r.IntN(10) == 0 { // near 2^127, to overflow
			a.Sub(lim, big.NewInt(r.Int64N(100)+1))
			if r.IntN(2) == 0 {
				a.Neg(a)
			}
			b.Mul(b, big.NewInt(1e18))
			b.Mul(b, big.NewInt(1e18))
		}
		da, ok1 := Dec128FromBig(a)
		db, ok2 := Dec128FromBig(b)
		if !ok1 || !ok2 {
			continue
		}
		if da.Big().Cmp(a) != 0 || da.Neg().Big().Cmp(new(big.Int).Neg(a)) != 0 {
			t.Fatalf("%v: round trip %v, neg %v", a, da.Big(), da.Neg().Big())
		}
		sum := new(big.Int).Add(a, b)
		ds, ok := da.Add(db)
		if wantOK := sum.BitLen() <= 127; ok != wantOK || ok && ds.Big().Cmp(sum) != 0 {
			t.Fatalf("%v + %v = %v (%v), want %v", a, b, ds.Big(), ok, sum)
		}
		if da.Cmp(db) != a.Cmp(b) || bytes.Compare(da.AppendKey(nil), db.AppendKey(nil)) != a.Cmp(b) {
			t.Fatalf("compare %v %v", a, b)
		}
		if Dec128FromKey(da.AppendKey(nil)) != da {
			t.Fatalf("key round trip %v", a)
		}
		p := r.IntN(38) + 1
		if got, want := da.Fits(p), new(big.Int).Abs(a).Cmp(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)) < 0; got != want {
			t.Fatalf("%v fits %d: %v", a, p, got)
		}
		s := r.IntN(39)
		text := da.Text(s)
		back, ok := ParseDecimal(text, 38, s)
		if a.BitLen() <= 126 && len(strings.TrimLeft(strings.Replace(strings.TrimPrefix(text, "-"), ".", "", 1), "0")) <= 38 && (!ok || back != da) {
			t.Fatalf("%v scale %d: text %q parses to %v %v", a, s, text, back.Big(), ok)
		}
	}
}

// TestParseDecimalRounds: HALF_UP to the scale (away from zero at a tie),
// refused beyond the precision, as Spark's Decimal.set does.
func TestParseDecimalRounds(t *testing.T) {
	for _, c := range []struct {
		in   string
		p, s int
		want string
		ok   bool
	}{
		{"1.005", 5, 2, "1.01", true}, {"-1.005", 5, 2, "-1.01", true}, {"1.004", 5, 2, "1.00", true},
		{"999.995", 5, 2, "", false}, {"1e3", 6, 2, "1000.00", true}, {".5", 1, 0, "1", true},
		{"abc", 5, 2, "", false}, {"12345678901234567890123456789012345678", 38, 0, "12345678901234567890123456789012345678", true},
	} {
		d, ok := ParseDecimal(c.in, c.p, c.s)
		if ok != c.ok || ok && d.Text(c.s) != c.want {
			t.Errorf("ParseDecimal(%q, %d, %d) = %s %v, want %s %v", c.in, c.p, c.s, d.Text(c.s), ok, c.want, c.ok)
		}
	}
}

// FuzzParseType: a state schema's type name parses to a type whose String
// is the name, or not at all; never a panic.
func FuzzParseType(f *testing.F) {
	for _, s := range []string{"int64", "decimal(38,10)", "array<decimal(5,0)>", "array<array<int>>", "decimal(39,0)", "decimal(05,1)", "timestamp_ntz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		typ, ok := ParseType(s)
		if ok && typ.String() != s {
			t.Fatalf("%q parses to %v", s, typ)
		}
	})
}

// TestTypePacking: parameters survive the packing, kinds compare by Kind.
func TestTypePacking(t *testing.T) {
	d := DecimalOf(38, 10)
	a := ArrayOf(d)
	if d.Kind() != Decimal || d.Precision() != 38 || d.Scale() != 10 || a.Kind() != Array || a.Elem() != d ||
		a.String() != "array<decimal(38,10)>" || d.Storage() != Decimal || Binary.Storage() != String || Float32.Storage() != Float64 {
		t.Fatalf("%v %v", d, a)
	}
	for _, typ := range []Type{Int64, Float64, String, Timestamp, Boolean, Int32, Date, Int8, Int16, Float32, Binary, TimestampNTZ, d, a} {
		if back, ok := ParseType(typ.String()); !ok || back != typ {
			t.Errorf("%v reads back as %v %v", typ, back, ok)
		}
	}
}

// TestArrayOfStringsAsDocumented builds an array<string> column the way
// the package doc says a source does, and checks it validates and reads.
func TestArrayOfStringsAsDocumented(t *testing.T) {
	topics := MakeColumn("topics", ArrayOf(String), 0, 2)
	topics.Elems.Strings = append(topics.Elems.Strings, "0xddf2", "0x0000")
	topics.Offsets = append(topics.Offsets, int32(len(topics.Elems.Strings)))
	topics.Offsets = append(topics.Offsets, int32(len(topics.Elems.Strings))) // a null row
	topics.Valid = []bool{true, false}
	b := &Batch{Len: 2, Columns: []Column{topics}}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if topics.Len() != 2 || topics.ArrayLen(0) != 2 || topics.ArrayLen(1) != 0 || !topics.IsNull(1) {
		t.Fatalf("%+v", topics)
	}
	bad := topics
	bad.Offsets = []int32{0, 3, 3}
	if err := (&Batch{Len: 2, Columns: []Column{bad}}).Validate(); err == nil {
		t.Fatal("offsets past the elements validated")
	}
}
