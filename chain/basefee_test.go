package chain

import "testing"

// TestNodeBaseFeeBounded: a long-running node's base fee follows the
// EIP-1559 rule from each parent and stays near maxNodeBaseFee, far inside
// the int64 of the baseFeePerGas column (it overflowed after ~4,000 blocks).
func TestNodeBaseFeeBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("mines 6,000 blocks")
	}
	const blocks = 6000
	n := startTestNode(t, NodeOptions{Manual: true, InitialBlocks: blocks})
	var peak uint64
	for i := uint64(1); i < blocks; i++ {
		h, p := n.Header(n.base+i), n.Header(n.base+i-1)
		if want := nextBaseFee(p.BaseFee.Uint64(), p.GasUsed, p.GasLimit); h.BaseFee.Uint64() != want {
			t.Fatalf("block %d: base fee %d, EIP-1559 gives %d", h.Number, h.BaseFee, want)
		}
		peak = max(peak, h.BaseFee.Uint64())
	}
	if peak < maxNodeBaseFee || peak > 2*maxNodeBaseFee {
		t.Fatalf("peak base fee %d: want the bound %d reached and held", peak, uint64(maxNodeBaseFee))
	}
}
