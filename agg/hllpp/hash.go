package hllpp

import (
	"math"
	"math/big"
	"math/bits"

	"github.com/cespare/xxhash/v2"

	"github.com/ethstream/ethstream/stream"
)

// Seed is the seed Spark's HyperLogLogPlusPlusHelper hashes every value
// with (XxHash64Function.hash(value, dataType, 42)).
const Seed = 42

const (
	prime1 uint64 = 0x9E3779B185EBCA87
	prime2 uint64 = 0xC2B2AE3D27D4EB4F
	prime3 uint64 = 0x165667B19E3779F9
	prime4 uint64 = 0x85EBCA77C2B2AE63
	prime5 uint64 = 0x27D4EB2F165667C5
)

func fmix(h uint64) uint64 {
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

// HashInt is Spark's XXH64.hashInt: xxhash64 of the int's 4 bytes
// (little-endian), written out so that it costs no allocation.
func HashInt(v int32, seed uint64) uint64 {
	h := seed + prime5 + 4
	h ^= uint64(uint32(v)) * prime1
	h = bits.RotateLeft64(h, 23)*prime2 + prime3
	return fmix(h)
}

// HashLong is Spark's XXH64.hashLong: xxhash64 of the long's 8 bytes.
func HashLong(v int64, seed uint64) uint64 {
	h := seed + prime5 + 8
	h ^= bits.RotateLeft64(uint64(v)*prime2, 31) * prime1
	h = bits.RotateLeft64(h, 27)*prime1 + prime4
	return fmix(h)
}

// Hasher hashes the values of one column type as Spark's HLL++ does
// (after its float normalisation: every NaN is one NaN, -0.0 is 0.0). It
// holds a reusable digest for byte strings: not safe for concurrent use.
type Hasher struct {
	t stream.Type
	d *xxhash.Digest
}

// Hashable reports whether approx_count_distinct takes a column of t
// (every scalar type; an array is not hashed here).
func Hashable(t stream.Type) bool { return t.Kind() != stream.Array && t != 0 }

// NewHasher returns the hasher of a column of t (Hashable(t)).
func NewHasher(t stream.Type) *Hasher { return &Hasher{t: t, d: xxhash.NewWithSeed(Seed)} }

// Row returns the hash of c's row i (not null).
func (h *Hasher) Row(c *stream.Column, i int) uint64 {
	switch h.t.Kind() {
	case stream.Boolean, stream.Int8, stream.Int16, stream.Int32, stream.Date:
		return HashInt(int32(c.Int64s[i]), Seed)
	case stream.Float32:
		f := float32(c.Float64s[i])
		switch {
		case f != f:
			return HashInt(0x7fc00000, Seed) // Float.floatToIntBits(NaN)
		case f == 0:
			return HashInt(0, Seed)
		}
		return HashInt(int32(math.Float32bits(f)), Seed)
	case stream.Float64:
		f := c.Float64s[i]
		switch {
		case f != f:
			return HashLong(0x7ff8000000000000, Seed) // Double.doubleToLongBits(NaN)
		case f == 0:
			return HashLong(0, Seed)
		}
		return HashLong(int64(math.Float64bits(f)), Seed)
	case stream.String, stream.Binary:
		return h.bytes(c.Strings[i])
	case stream.Decimal:
		d := c.Decimals[i]
		if h.t.Precision() <= 18 {
			return HashLong(int64(d.Lo), Seed) // the unscaled value fits a long
		}
		return h.bigBytes(d.Big())
	}
	// BIGINT, TIMESTAMP, TIMESTAMP_NTZ: longs.
	return HashLong(c.Int64s[i], Seed)
}

func (h *Hasher) bytes(s string) uint64 {
	h.d.ResetWithSeed(Seed)
	_, _ = h.d.WriteString(s)
	return h.d.Sum64()
}

// bigBytes hashes Java's BigInteger.toByteArray of v: the shortest
// big-endian two's complement bytes holding v and its sign bit.
func (h *Hasher) bigBytes(v *big.Int) uint64 {
	return h.bytes(string(twosComplement(v)))
}

func twosComplement(v *big.Int) []byte {
	if v.Sign() >= 0 {
		b := v.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -v - 1 in magnitude, inverted: the two's complement of v.
	m := new(big.Int).Neg(v)
	m.Sub(m, big.NewInt(1))
	b := m.Bytes()
	for i := range b {
		b[i] = ^b[i]
	}
	if len(b) == 0 || b[0]&0x80 == 0 {
		b = append([]byte{0xff}, b...)
	}
	return b
}
