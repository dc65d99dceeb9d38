package chain

import "testing"

// TestNextBaseFeeBounded: a long continuation's base fee follows the
// EIP-1559 rule from each parent and stays near MaxNextBaseFee, far inside
// the int64 of the baseFeePerGas column (it overflowed after ~4,000 blocks).
func TestNextBaseFeeBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 6,000 blocks")
	}
	p := LastDaysPreset(1)
	day := BuildDay(1, p.DayIndex())
	day.LinkTo(Anchor(1, p.FirstBlock))
	parent := day.Headers[len(day.Headers)-1]
	var peak uint64
	for i := 0; i < 6000; i++ {
		h := Next(1, parent, 0).Header
		if want := nextBaseFee(parent.BaseFee.Uint64(), parent.GasUsed, parent.GasLimit); h.BaseFee.Uint64() != want {
			t.Fatalf("block %d: base fee %d, EIP-1559 gives %d", h.Number, h.BaseFee, want)
		}
		if h.ParentHash != parent.Hash() {
			t.Fatalf("block %d: parent hash %s, parent's hash %s", h.Number, h.ParentHash, parent.Hash())
		}
		peak = max(peak, h.BaseFee.Uint64())
		parent = h
	}
	if peak < MaxNextBaseFee || peak > 2*MaxNextBaseFee {
		t.Fatalf("peak base fee %d: want the bound %d reached and held", peak, uint64(MaxNextBaseFee))
	}
}
