// Package hllpp is Spark's HyperLogLog++ (HyperLogLogPlusPlusHelper, the
// dense HLL++ of Heule, Nunkesser and Hall behind approx_count_distinct)
// bit for bit: the same precision from relativeSD, the same hash of each
// value (xxhash64 with seed 42, hash.go), the same register layout and the
// same bias correction and linear-counting switch, so an estimate equals
// Spark's for the same input and the registers can be merged in any order.
//
// # Registers
//
// A sketch of precision p has m = 2^p registers of 6 bits (the number of
// leading zeros, plus one, of a 64-bit hash is at most 64 - p + 1), packed
// ten to a 64-bit word as Spark packs them: register j is bits
// 6*(j%10) .. 6*(j%10)+5 of word j/10, and there are m/10 + 1 words (the
// last one partly used). Encode writes the words little-endian, 8 bytes
// each, nothing else: the bytes are the whole state of a sketch, and p is
// known from its length. The layout is version 1 of this encoding; a
// different one would need a new version recorded beside it by its user.
//
// A Sketch is not safe for concurrent use; a Params is immutable.
package hllpp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
)

const (
	registerSize     = 6
	registerMask     = 1<<registerSize - 1
	registersPerWord = 64 / registerSize
	// k is the number of nearest measured estimates whose biases are
	// averaged (Spark's K).
	k = 6
)

// thresholds[p-4] is the linear-counting estimate below which it is used
// instead of the bias-corrected one (the HLL++ appendix, as Spark has it).
var thresholds = [...]float64{10, 20, 40, 80, 220, 400, 900, 1800, 3100, 6500, 15500, 20000, 50000, 120000, 350000}

// DefaultRelativeSD is approx_count_distinct's default relativeSD.
const DefaultRelativeSD = 0.05

// Params is a precision: what a relativeSD selects.
type Params struct {
	p        int
	m        int
	numWords int
	alphaM2  float64
}

// MaxPrecision is the largest precision ethstream keeps: 2^21 registers,
// 1.7 MB of state per group, what relativeSD 0.001 (the smallest of
// Spark's HyperLogLogPlusPlusSuite) selects. Spark 4 sets no upper bound
// (its helper requires only p >= 4 and estimates with plain HLL above 18);
// ethstream refuses a larger p rather than hold megabytes per group.
const MaxPrecision = 21

// MinRelativeSD is, rounded up, the smallest relativeSD of MaxPrecision:
// 1.106 / 2^(21/2) = 0.000764.
const MinRelativeSD = 0.00077

// ErrTooCoarse is the error of a relativeSD above 0.39 (p < 4), in
// Spark's words (HyperLogLogPlusPlusHelper's require) but for its final
// period, which the coded error's own punctuation replaces.
var ErrTooCoarse = errors.New("HLL++ requires at least 4 bits for addressing. Use a lower error, at most 39%")

// Precision returns the precision p Spark derives from relativeSD:
// ceil(2 * log2(1.106 / relativeSD)). It refuses a p below 4 as Spark
// does (ErrTooCoarse: relativeSD above 0.39) and a p above MaxPrecision
// (relativeSD below MinRelativeSD), which Spark runs.
func Precision(relativeSD float64) (int, error) {
	if !(relativeSD > 0) || math.IsInf(relativeSD, 0) {
		return 0, fmt.Errorf("relativeSD %v must be a positive number", relativeSD)
	}
	p := int(math.Ceil(2.0 * math.Log(1.106/relativeSD) / math.Log(2.0)))
	if p < 4 {
		return 0, ErrTooCoarse
	}
	if p > MaxPrecision {
		return 0, fmt.Errorf("relativeSD %v needs precision %d (%d MB of registers per group): the smallest ethstream keeps is %v (precision %d)",
			relativeSD, p, 8*(1<<p/registersPerWord+1)>>20, MinRelativeSD, MaxPrecision)
	}
	return p, nil
}

// New returns the Params of precision p (4 <= p <= MaxPrecision; Precision
// gives it). Above 18 there are no bias tables: the estimate is plain
// HyperLogLog with linear counting, as Spark's query does.
func New(p int) Params {
	if p < 4 || p > MaxPrecision {
		panic(fmt.Sprintf("hllpp: precision %d outside 4..%d", p, MaxPrecision))
	}
	m := 1 << p
	var alpha float64
	switch p {
	case 4:
		alpha = 0.673
	case 5:
		alpha = 0.697
	case 6:
		alpha = 0.709
	default:
		alpha = 0.7213 / (1.0 + 1.079/float64(m))
	}
	return Params{p: p, m: m, numWords: m/registersPerWord + 1, alphaM2: alpha * float64(m) * float64(m)}
}

// P is the precision.
func (ps Params) P() int { return ps.p }

// Words is the number of 64-bit words of a sketch.
func (ps Params) Words() int { return ps.numWords }

// EncodedLen is the length of Encode's bytes.
func (ps Params) EncodedLen() int { return 8 * ps.numWords }

// TrueRSD is the relative standard deviation the precision guarantees
// (Spark's trueRsd: 1.04 / sqrt(m)).
func (ps Params) TrueRSD() float64 { return 1.04 / math.Sqrt(float64(ps.m)) }

// Sketch is the registers of one group.
type Sketch []uint64

// NewSketch returns an empty sketch (every register 0: estimate 0).
func (ps Params) NewSketch() Sketch { return make(Sketch, ps.numWords) }

// Add folds hash x (Hash's value of one input) into s.
func (ps Params) Add(s Sketch, x uint64) {
	idx := int(x >> (64 - ps.p))
	// The leading zeros of the bits after the index, plus one; the padding
	// bit bounds it at 64 - p + 1.
	pw := uint64(bits.LeadingZeros64(x<<ps.p|1<<(ps.p-1))) + 1
	w := idx / registersPerWord
	shift := registerSize * (idx - w*registersPerWord)
	if cur := s[w] >> shift & registerMask; pw > cur {
		s[w] = s[w]&^(registerMask<<shift) | pw<<shift
	}
}

// Merge sets each register of dst to the larger of dst's and src's, as
// the union of the two sketches' inputs would have.
func (ps Params) Merge(dst, src Sketch) {
	for w := range dst {
		a, b := dst[w], src[w]
		if a == b {
			continue
		}
		var out uint64
		for i := 0; i < registersPerWord; i++ {
			mask := uint64(registerMask) << (registerSize * i)
			out |= max(a&mask, b&mask)
		}
		dst[w] = out
	}
}

// Estimate is Spark's query: the bias-corrected harmonic mean of the
// registers, or linear counting while registers are empty and the count
// small, rounded to the nearest long as Java's Math.round.
func (ps Params) Estimate(s Sketch) int64 {
	var zInverse, v float64
	idx := 0
	for _, word := range s {
		for i := 0; idx < ps.m && i < registersPerWord; i++ {
			r := word >> (registerSize * i) & registerMask
			zInverse += 1.0 / float64(uint64(1)<<r)
			if r == 0 {
				v++
			}
			idx++
		}
	}
	m := float64(ps.m)
	e := ps.alphaM2 / zInverse
	corrected := func() float64 {
		if ps.p < 19 && e < 5.0*m {
			return e - ps.estimateBias(e)
		}
		return e
	}
	var est float64
	if v > 0 {
		h := m * math.Log(m/v)
		if (ps.p < 19 && h <= thresholds[ps.p-4]) || e <= 2.5*m {
			est = h
		} else {
			est = corrected()
		}
	} else {
		est = corrected()
	}
	return javaRound(est)
}

// estimateBias averages the biases of the k measured estimates nearest e.
func (ps Params) estimateBias(e float64) float64 {
	estimates := rawEstimates[ps.p-4]
	n := len(estimates)
	// Java's Arrays.binarySearch: the index of e, or where it would go.
	nearest := sort.SearchFloat64s(estimates, e)
	dist := func(i int) float64 { d := e - estimates[i]; return d * d }
	low := max(nearest-k+1, 0)
	high := min(low+k, n)
	for high < n && dist(high) < dist(low) {
		low++
		high++
	}
	b := biases[ps.p-4]
	sum := 0.0
	for i := low; i < high; i++ {
		sum += b[i]
	}
	return sum / float64(high-low)
}

// javaRound is Java's Math.round(double): floor(x + 0.5), saturating.
func javaRound(x float64) int64 {
	if math.IsNaN(x) {
		return 0
	}
	r := math.Floor(x + 0.5)
	if r >= math.MaxInt64 {
		return math.MaxInt64
	}
	if r <= math.MinInt64 {
		return math.MinInt64
	}
	return int64(r)
}

// Encode appends s's words, 8 bytes little-endian each.
func (s Sketch) Encode(dst []byte) []byte {
	for _, w := range s {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return dst
}

// Decode reads Encode's bytes of a sketch of ps into s (len ps.Words()),
// false when their length is not EncodedLen or a register holds more than
// a 64-bit hash can give (64 - p + 1): not a sketch of this precision.
func (ps Params) Decode(s Sketch, b []byte) bool {
	if len(b) != ps.EncodedLen() || len(s) != ps.numWords {
		return false
	}
	limit := uint64(64 - ps.p + 1)
	idx := 0
	for w := range s {
		s[w] = binary.LittleEndian.Uint64(b[8*w:])
		for i := 0; i < registersPerWord; i++ {
			r := s[w] >> (registerSize * i) & registerMask
			if idx >= ps.m && r != 0 || r > limit {
				return false
			}
			idx++
		}
		if s[w]>>(registerSize*registersPerWord) != 0 {
			return false
		}
	}
	return true
}
