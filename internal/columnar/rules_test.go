package columnar

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// TestDecimalFixedLen: the FIXED_LEN_BYTE_ARRAY length of every precision
// agrees with Spark's formula written independently (ceil((p·log2 10 + 1)
// / 8), the sign bit plus p digits' bits) and with the length parquet-go
// gives a decimal-tagged array of that length, so the declared type and the
// written values agree; Spark's documented sizes at the edges.
func TestDecimalFixedLen(t *testing.T) {
	for p := 1; p <= stream.MaxDecimalPrecision; p++ {
		spark := int(math.Ceil((float64(p)*math.Log2(10) + 1) / 8))
		if got := DecimalFixedLen(p); got != spark {
			t.Errorf("p=%d: %d bytes, Spark's formula %d", p, got, spark)
		}
		typ := reflect.StructOf([]reflect.StructField{{Name: "D",
			Type: reflect.PointerTo(reflect.ArrayOf(DecimalFixedLen(p), reflect.TypeOf(byte(0)))),
			Tag:  reflect.StructTag(fmt.Sprintf(`parquet:"d,optional,decimal(0:%d)"`, p))}})
		if got := parquet.SchemaOf(reflect.New(typ).Interface()).Fields()[0].Type().Length(); got != DecimalFixedLen(p) {
			t.Errorf("p=%d: parquet-go declares %d bytes, we write %d", p, got, DecimalFixedLen(p))
		}
	}
	for p, want := range map[int]int{19: 9, 21: 9, 22: 10, 28: 12, 38: 16} {
		if got := DecimalFixedLen(p); got != want {
			t.Errorf("DecimalFixedLen(%d) = %d, want %d", p, got, want)
		}
	}
}

// TestAppendDecimalFixed: values at each precision's extremes and random
// ones, written at the precision's length, read back by BigEndianDec and
// by math/big's two's complement.
func TestAppendDecimalFixed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for p := 19; p <= stream.MaxDecimalPrecision; p++ {
		top := new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil), big.NewInt(1))
		vals := []*big.Int{top, new(big.Int).Neg(top), big.NewInt(0), big.NewInt(-1), big.NewInt(1)}
		for range 20 {
			v := new(big.Int).Lsh(new(big.Int).SetUint64(rng.Uint64()), 64)
			v.Or(v, new(big.Int).SetUint64(rng.Uint64())).Mod(v, top)
			if rng.IntN(2) == 0 {
				v.Neg(v)
			}
			vals = append(vals, v)
		}
		n := DecimalFixedLen(p)
		for _, v := range vals {
			d, ok := stream.Dec128FromBig(v)
			if !ok {
				t.Fatalf("%s does not fit", v)
			}
			b := AppendDecimalFixed([]byte{0xAA}, d, n)[1:]
			if len(b) != n {
				t.Fatalf("p=%d: %d bytes, want %d", p, len(b), n)
			}
			u := new(big.Int).SetBytes(b)
			if b[0]&0x80 != 0 {
				u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
			}
			back, err := BigEndianDec(b)
			if err != nil || u.Cmp(v) != 0 || back != d {
				t.Errorf("p=%d %s: bytes %x read %s / %v (%v)", p, v, b, u, back.Big(), err)
			}
		}
	}
}
