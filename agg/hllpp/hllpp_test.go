package hllpp

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestXxhash64SparkDoc checks the hash against the example of Spark's
// xxhash64 documentation, SELECT xxhash64('Spark', array(123), 2) =
// 5602566077635097486: a string's UTF-8 bytes, then an int, then an int,
// each seeded with the previous hash (the first with 42, HLL++'s seed).
func TestXxhash64SparkDoc(t *testing.T) {
	h := NewHasher(stream.String)
	c := &stream.Column{Type: stream.String, Strings: []string{"Spark"}}
	x := h.Row(c, 0)
	x = HashInt(123, x)
	x = HashInt(2, x)
	if int64(x) != 5602566077635097486 {
		t.Fatalf("xxhash64('Spark', array(123), 2) = %d, Spark's is 5602566077635097486", int64(x))
	}
}

// TestHashLongIsXXH64 checks the closed forms of hashInt and hashLong
// against the general xxhash64 of the same little-endian bytes.
func TestHashLongIsXXH64(t *testing.T) {
	h := NewHasher(stream.String)
	for _, v := range []int64{0, 1, -1, 42, 1 << 40, -1 << 63} {
		b := make([]byte, 8)
		for i := range b {
			b[i] = byte(uint64(v) >> (8 * i))
		}
		if got, want := HashLong(v, Seed), h.bytes(string(b)); got != want {
			t.Errorf("hashLong(%d) = %x, xxhash64 of its bytes %x", v, got, want)
		}
		if got, want := HashInt(int32(v), Seed), h.bytes(string(b[:4])); got != want {
			t.Errorf("hashInt(%d) = %x, xxhash64 of its bytes %x", int32(v), got, want)
		}
	}
}

func TestTwosComplementIsJavaToByteArray(t *testing.T) {
	for _, c := range []struct {
		v    int64
		want []byte
	}{{0, []byte{0}}, {1, []byte{1}}, {127, []byte{0x7f}}, {128, []byte{0, 0x80}}, {-1, []byte{0xff}},
		{-128, []byte{0x80}}, {-129, []byte{0xff, 0x7f}}, {255, []byte{0, 0xff}}, {-256, []byte{0xff, 0x00}}} {
		if got := twosComplement(big.NewInt(c.v)); !slices.Equal(got, c.want) {
			t.Errorf("toByteArray(%d) = %x, want %x", c.v, got, c.want)
		}
	}
}

func TestPrecision(t *testing.T) {
	for _, c := range []struct {
		rsd float64
		p   int
	}{{0.05, 9}, {0.1, 7}, {0.025, 11}, {0.01, 14}, {0.39, 4}, {0.003, 18}, {0.0022, 18},
		// Spark 4 runs these (its suite estimates with 0.001).
		{0.002, 19}, {0.001, 21}, {MinRelativeSD, MaxPrecision}} {
		p, err := Precision(c.rsd)
		if err != nil || p != c.p {
			t.Errorf("Precision(%v) = %d, %v; want %d", c.rsd, p, err, c.p)
		}
	}
	// HyperLogLogPlusPlusSuite "test invalid parameter relativeSD": 0.4,
	// with HyperLogLogPlusPlusHelper's message.
	if _, err := Precision(0.4); err == nil || err.Error() != "HLL++ requires at least 4 bits for addressing. Use a lower error, at most 39%" {
		t.Errorf("Precision(0.4): %v", err)
	}
	// Below ethstream's smallest: the message names it, and it is one.
	for _, rsd := range []float64{0.00076, 0.0001, 0, -1} {
		if _, err := Precision(rsd); err == nil {
			t.Errorf("Precision(%v) accepted", rsd)
		}
	}
	if _, err := Precision(0.0001); err == nil || !strings.Contains(err.Error(), "precision 27") || !strings.Contains(err.Error(), "0.00077 (precision 21)") {
		t.Errorf("Precision(0.0001): %v", err)
	}
}

// TestBiasTablesAreSparks pins the bias tables to Spark's
// HyperLogLogPlusPlusHelper source and to how the HLL++ appendix measured
// them, independently of the Go port's transcription: each precision's
// first and last raw estimate and bias as Spark's source writes them (so
// its length too), and, at every entry, raw estimate - bias = the true
// cardinality the appendix measured at, an integer starting at 1 and
// growing by 5m/200 rounded (m = 2^p) up to 5m. A wrong digit anywhere in
// either table breaks that (a bias error would otherwise pass the 3-sigma
// bounds of the suite's estimates).
func TestBiasTablesAreSparks(t *testing.T) {
	// Spark's RAW_ESTIMATE_DATA(p-4) and BIAS_DATA(p-4): first, last.
	spark := [...][4]float64{
		{11, 77.2394, 10, -1.7606},
		{23, 158.5852, 22, -0.414800000000014},
		{46, 318.9858, 45, 0.985799999999983},
		{92, 638.6102, 91, 2.61019999999996},
		{184.2152, 1274.5192, 183.2152, 1.51919999999996},
		{369, 2553.768, 368, -6.23199999999997},
		{738.1256, 5084.1828, 737.1256, -9.81720000000041},
		{1477, 10229.9176, 1476, -10.0823999999993},
		{2954, 20463.22, 2953, -15.7799999999988},
		{5908.5052, 40717.2424, 5907.5052, -37.7575999999972},
		{11817.475, 81876.3884, 11816.475, -42.6116000000038},
		{23635.0036, 163729.2842, 23634.0036, -109.715800000005},
		{47271, 325847.1542, 47270, -193.84580000001},
		{94542, 654941.845, 94541, -417.155000000028},
		{189084, 1303455.691, 189083, -713.308999999892},
	}
	for i, want := range spark {
		p := i + 4
		raw, bias := rawEstimates[i], biases[i]
		if len(raw) != len(bias) || len(raw) < 2 {
			t.Fatalf("p %d: %d raw estimates, %d biases", p, len(raw), len(bias))
		}
		if got := [4]float64{raw[0], raw[len(raw)-1], bias[0], bias[len(bias)-1]}; got != want {
			t.Errorf("p %d: first and last raw estimate, bias %v; Spark's %v", p, got, want)
		}
		step := 5 * float64(int(1)<<p) / 200
		prev := 0.0
		for j := range raw {
			n := raw[j] - bias[j]
			if math.Abs(n-math.Round(n)) > 1e-6 {
				t.Errorf("p %d entry %d: raw %v - bias %v = %v, not a cardinality", p, j, raw[j], bias[j], n)
				continue
			}
			n = math.Round(n)
			switch d := n - prev; {
			case j == 0 && n != 1:
				t.Errorf("p %d: first measured cardinality %v, want 1", p, n)
			case j > 0 && (d < 1 || d < math.Floor(step) || d > math.Ceil(step)):
				t.Errorf("p %d entry %d: cardinality %v after %v, a step of %v (5m/200 = %v)", p, j, n, prev, d, step)
			}
			prev = n
		}
		if m := float64(int(1) << p); prev > 5*m {
			t.Errorf("p %d: last measured cardinality %v beyond 5m = %v", p, prev, 5*m)
		}
	}
}

// TestPlainHLLAbovePrecision18 is HyperLogLogPlusPlusSuite's
// "deterministic cardinality estimation" at relativeSD 0.001 (precision 21,
// where Spark 4 has no bias table and estimates with plain HLL and linear
// counting): within 3 standard errors.
func TestPlainHLLAbovePrecision18(t *testing.T) {
	p, err := Precision(0.001)
	if err != nil || p != 21 {
		t.Fatalf("Precision(0.001) = %d, %v", p, err)
	}
	ps := New(p)
	ns := []int{100, 1000, 10000, 100000}
	if !testing.Short() {
		ns = append(ns, 1000000)
	}
	for _, n := range ns {
		est := estimateInts(ps, func(i int) int32 { return int32(i / 10) }, n*10)
		if err := relErr(est, n); err >= 3*ps.TrueRSD() {
			t.Errorf("p 21 n %d: estimate %d, error %.5f >= 3*%.5f", n, est, err, ps.TrueRSD())
		}
	}
}

func estimateInts(ps Params, vals func(i int) int32, n int) int64 {
	s := ps.NewSketch()
	for i := range n {
		ps.Add(s, HashInt(vals(i), Seed))
	}
	return ps.Estimate(s)
}

// TestSmallExact: Spark's documented examples, and the suite's "add nulls"
// (an empty sketch estimates 0).
func TestSmallExact(t *testing.T) {
	ps := New(9)
	if got := ps.Estimate(ps.NewSketch()); got != 0 {
		t.Fatalf("empty sketch: %d", got)
	}
	in := []int32{1, 1, 2, 2, 3}
	if got := estimateInts(ps, func(i int) int32 { return in[i] }, len(in)); got != 3 {
		t.Fatalf("approx_count_distinct(1,1,2,2,3) = %d, Spark's is 3", got)
	}
}

// TestDeterministicCardinality is HyperLogLogPlusPlusSuite's
// "deterministic cardinality estimation": n/10 distinct ints, each 10
// times, estimated within 3 standard errors for every precision.
func TestDeterministicCardinality(t *testing.T) {
	ns := []int{100, 500, 1000, 5000, 10000, 50000, 100000}
	if !testing.Short() {
		ns = append(ns, 500000)
	}
	for _, rsd := range []float64{0.1, 0.05, 0.025, 0.01} {
		p, _ := Precision(rsd)
		ps := New(p)
		for _, n := range ns {
			est := estimateInts(ps, func(i int) int32 { return int32(i / 10) }, n*10)
			if err := relErr(est, n); err >= 3*ps.TrueRSD() {
				t.Errorf("rsd %v n %d: estimate %d, error %.4f >= 3*%.4f", rsd, n, est, err, ps.TrueRSD())
			}
		}
	}
}

func relErr(est int64, n int) float64 {
	e := float64(est)/float64(n) - 1
	if e < 0 {
		return -e
	}
	return e
}

// TestRandomCardinalityAgainstExact: the error bound against an exact
// count of distinct values of every hashed type, drawn at random.
func TestRandomCardinalityAgainstExact(t *testing.T) {
	r := rand.New(rand.NewPCG(323981238, 1))
	types := []stream.Type{stream.Int64, stream.Int32, stream.String, stream.Float64, stream.DecimalOf(38, 2), stream.DecimalOf(12, 2), stream.Date}
	for _, typ := range types {
		for _, n := range []int{100, 10000, 200000} {
			ps := New(9)
			c := &stream.Column{Type: typ}
			seen := map[string]bool{}
			h := NewHasher(typ)
			s := ps.NewSketch()
			for range n {
				v := r.Int64N(int64(n) * 2)
				var key string
				switch typ.Storage() {
				case stream.Int64:
					c.Int64s = []int64{v % (1 << 31)}
					key = big.NewInt(c.Int64s[0]).String()
				case stream.Float64:
					c.Float64s = []float64{float64(v) / 3}
					key = big.NewFloat(c.Float64s[0]).String()
				case stream.String:
					c.Strings = []string{big.NewInt(v).Text(36)}
					key = c.Strings[0]
				case stream.Decimal:
					d := stream.Dec128Of(v * 1000003)
					c.Decimals = []stream.Dec128{d}
					key = d.Big().String()
				}
				seen[key] = true
				ps.Add(s, h.Row(c, 0))
			}
			if err := relErr(ps.Estimate(s), len(seen)); err >= 3*ps.TrueRSD() {
				t.Errorf("%s n %d: estimate %d of %d distinct, error %.4f", typ, n, ps.Estimate(s), len(seen), err)
			}
		}
	}
}

// TestMergeOrderIndependent is the suite's "merging HLL instances" plus
// any split and order: the registers of a union are the same however its
// parts were folded and merged.
func TestMergeOrderIndependent(t *testing.T) {
	ps := New(9)
	whole := ps.NewSketch()
	for i := 999999; i >= 0; i-- {
		ps.Add(whole, HashInt(int32(i), Seed))
	}
	lo, hi := ps.NewSketch(), ps.NewSketch()
	for i := range 500000 {
		ps.Add(lo, HashInt(int32(i), Seed))
		ps.Add(hi, HashInt(int32(i+500000), Seed))
	}
	ps.Merge(lo, hi)
	if !slices.Equal(lo, whole) {
		t.Fatal("merged halves differ from the whole")
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		parts := make([]Sketch, 1+r.IntN(6))
		for i := range parts {
			parts[i] = ps.NewSketch()
		}
		for i := range 1000000 {
			ps.Add(parts[r.IntN(len(parts))], HashInt(int32(i), Seed))
		}
		r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		acc := ps.NewSketch()
		for _, p := range parts {
			ps.Merge(acc, p)
		}
		if !slices.Equal(acc, whole) {
			t.Fatal("a shuffled merge of parts differs from the whole")
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	ps := New(9)
	s := ps.NewSketch()
	for i := range 5000 {
		ps.Add(s, HashLong(int64(i), Seed))
	}
	b := s.Encode(nil)
	if len(b) != ps.EncodedLen() || len(b) != 8*(512/10+1) {
		t.Fatalf("encoded %d bytes", len(b))
	}
	back := ps.NewSketch()
	if !ps.Decode(back, b) || !slices.Equal(back, s) {
		t.Fatal("round trip differs")
	}
	if ps.Decode(back, b[:len(b)-8]) {
		t.Fatal("a short sketch decoded")
	}
	bad := slices.Clone(b)
	bad[len(bad)-1] = 0xff // registers past m
	if ps.Decode(back, bad) {
		t.Fatal("a register past m decoded")
	}
}

func TestNormalisedFloats(t *testing.T) {
	for _, typ := range []stream.Type{stream.Float64, stream.Float32} {
		h := NewHasher(typ)
		c := &stream.Column{Type: typ, Float64s: []float64{0, negZero(), nan(1), nan(2)}}
		if h.Row(c, 0) != h.Row(c, 1) || h.Row(c, 2) != h.Row(c, 3) {
			t.Errorf("%s: -0.0 or NaNs hash apart", typ)
		}
	}
}

func negZero() float64 { return math.Copysign(0, -1) }
func nan(payload uint64) float64 {
	return math.Float64frombits(0x7ff8000000000000 | payload)
}
