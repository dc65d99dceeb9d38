package ethrpc

import (
	"bytes"
	"testing"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

// FuzzFixedHex: fixedHex accepts what hexutil.UnmarshalFixedText accepts,
// for hashes, addresses and blooms, decodes it to the same bytes, and
// leaves out as it was when it refuses.
func FuzzFixedHex(f *testing.F) {
	for _, s := range []string{"0x" + "ab12" + "00112233445566778899aabbccddeeff00112233445566778899aabbccdd", "0X00112233445566778899AABBccddeeff00112233",
		"0x0011223344556677889900112233445566778899aabbccddeeff00112233445g", "0x", "", "00112233445566778899aabbccddeeff0011223344", "0x0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		for _, n := range []int{20, 32, 256} {
			want, got := bytes.Repeat([]byte{7}, n), bytes.Repeat([]byte{7}, n)
			werr := hexutil.UnmarshalFixedText("x", s, want)
			gerr := fixedHex(got, s)
			if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("%q into %d bytes: fixedHex %x (%v), UnmarshalFixedText %x (%v)", s, n, got, gerr, want, werr)
			}
		}
	})
}
