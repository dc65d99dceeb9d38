package delta

import (
	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go/format"
)

// fastSnappy is the SNAPPY page codec of the sink's data files with the
// fast snappy encoder. parquet-go's Snappy codec encodes with
// klauspost/compress's snappy.Encode, which is s2's "better" mode: about
// twice the CPU for pages a few percent smaller (a seed backfill's MERGE
// spent ~0.9 CPU-s in it). Both write the raw snappy block format, which
// every snappy decoder reads (Spark's, delta-rs's, DuckDB's, ours).
type fastSnappy struct{}

func (fastSnappy) String() string { return "SNAPPY" }

func (fastSnappy) CompressionCodec() format.CompressionCodec { return format.Snappy }

// Encode reuses dst's capacity when it holds s2.MaxEncodedLen(len(src)).
func (fastSnappy) Encode(dst, src []byte) ([]byte, error) {
	return s2.EncodeSnappy(dst, src), nil
}

func (fastSnappy) Decode(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst[:0], err
	}
	if cap(dst) >= n {
		dst = dst[:n]
	} else {
		dst = make([]byte, n)
	}
	return s2.Decode(dst, src)
}
