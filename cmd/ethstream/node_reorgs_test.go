package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
)

// TestNodeReorgs: a node with --reorg-rate 1 replaces its head block before
// every head request, at the same height, and says so; the replaced block
// stays readable by hash. The same seed makes the same depths.
func TestNodeReorgs(t *testing.T) {
	root, _ := archiveURI(t)
	m, err := archivegen.ReadManifest(root)
	if err != nil {
		t.Fatal(err)
	}
	depths := func(seed int64) (string, []string) {
		n, err := ethnode.Start(context.Background(), ethnode.Options{Manifest: m, Addr: "127.0.0.1:0", InitialBlocks: 10, Manual: true})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		var out bytes.Buffer
		r := nodeReorgs{rate: 1, depth: 4}
		if err := r.validate(); err != nil {
			t.Fatal(err)
		}
		r.install(n, seed, &out)
		c, err := ethclient.Dial(n.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var hashes []string
		for range 5 {
			h, err := c.HeaderByNumber(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if h.Number.Uint64() != n.Head() {
				t.Fatalf("head %d, node %d", h.Number, n.Head())
			}
			hashes = append(hashes, h.Hash().Hex())
		}
		for i := 1; i < len(hashes); i++ {
			if hashes[i] == hashes[i-1] {
				t.Fatalf("head request %d: the head was not replaced (%s)", i, hashes[i])
			}
		}
		// The first head, replaced since, is still served by hash.
		if _, err := c.HeaderByHash(context.Background(), common.HexToHash(hashes[0])); err != nil {
			t.Fatalf("replaced head %s: %v", hashes[0], err)
		}
		lines := regexp.MustCompile(`(?m)^reorg depth (\d) at head \d+: 0x[0-9a-f]{64} -> 0x[0-9a-f]{64}$`).FindAllStringSubmatch(out.String(), -1)
		if len(lines) != 5 {
			t.Fatalf("%d reorg lines for 5 head requests:\n%s", len(lines), out.String())
		}
		var ds []string
		for _, l := range lines {
			ds = append(ds, l[1])
		}
		return strings.Join(ds, " "), hashes
	}
	a, _ := depths(7)
	b, _ := depths(7)
	if a != b {
		t.Fatalf("seed 7 made depths %s, then %s", a, b)
	}
	for _, bad := range []struct {
		rate  float64
		depth int
	}{{1.5, 8}, {-0.1, 8}, {0.5, 0}} {
		r := &nodeReorgs{rate: bad.rate, depth: bad.depth}
		if err := r.validate(); err == nil || !strings.Contains(err.Error(), "INVALID_ARGUMENT") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
