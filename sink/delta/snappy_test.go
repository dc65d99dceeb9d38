package delta

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/golang/snappy"
	"github.com/parquet-go/parquet-go"
)

// TestFastSnappyIsSnappy: pages the sink's codec encodes decode with the
// reference snappy decoder (golang/snappy, the format's Go port) and with
// parquet-go's own codec, for empty, tiny, random and repetitive pages.
func TestFastSnappyIsSnappy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 100_000)
	for i := range random {
		random[i] = byte(rng.IntN(256))
	}
	repetitive := bytes.Repeat([]byte("0x829bd824b016326a401d083b33d092293333a830"), 5000)
	for _, src := range [][]byte{nil, []byte("x"), []byte("0123456789abcdef0"), random, repetitive} {
		enc, err := fastSnappy{}.Encode(make([]byte, 0, 16), src)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := snappy.Decode(nil, enc)
		if err != nil || !bytes.Equal(ref, src) {
			t.Fatalf("golang/snappy decodes %d bytes of a %d-byte page (err %v)", len(ref), len(src), err)
		}
		pq, err := (&parquet.Snappy).Decode(nil, enc)
		if err != nil || !bytes.Equal(pq, src) {
			t.Fatalf("parquet-go's codec decodes %d bytes of a %d-byte page (err %v)", len(pq), len(src), err)
		}
		own, err := fastSnappy{}.Decode(nil, enc)
		if err != nil || !bytes.Equal(own, src) {
			t.Fatalf("fastSnappy decodes %d bytes of a %d-byte page (err %v)", len(own), len(src), err)
		}
	}
	if enc, _ := (fastSnappy{}).Encode(nil, repetitive); len(enc) > len(repetitive)/10 {
		t.Fatalf("a repetitive page compressed to %d of %d bytes", len(enc), len(repetitive))
	}
}
