package ethrpc

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
)

// gethBinary is a real geth: $ETHSTREAM_GETH, geth on the PATH, or
// $GOPATH/bin/geth (go install github.com/ethereum/go-ethereum/cmd/geth@
// the go.mod version); "" when none.
func gethBinary() string {
	if p := os.Getenv("ETHSTREAM_GETH"); p != "" {
		return p
	}
	if p, err := exec.LookPath("geth"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "geth")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestTablesFromGethDev: the table sources parse a real geth's answers.
// It runs `geth --dev` (mining on demand), sends three transfers and a
// contract creation whose constructor emits an ERC-20 Transfer from the
// dev account (eth_sendTransaction), and checks every transactions, logs
// and token_transfers row against go-ethereum's client (checkTables).
// Skipped when no geth binary is found (gethBinary).
func TestTablesFromGethDev(t *testing.T) {
	geth := gethBinary()
	if geth == "" {
		t.Skip("no geth: go install github.com/ethereum/go-ethereum/cmd/geth@<go.mod's version>, or set ETHSTREAM_GETH")
	}
	port := freePort(t)
	cmd := exec.Command(geth, "--dev", "--datadir", t.TempDir(), "--http", "--http.addr", "127.0.0.1",
		"--http.port", strconv.Itoa(port), "--http.api", "eth,net,web3", "--ipcdisable", "--nodiscover", "--maxpeers", "0",
		"--port", "0", "--authrpc.port", strconv.Itoa(freePort(t)), "--verbosity", "1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rc *rpc.Client
	for {
		c, err := rpc.DialContext(ctx, url)
		if err == nil {
			var n hexutil.Uint64
			if err = c.CallContext(ctx, &n, "eth_blockNumber"); err == nil {
				rc = c
				break
			}
			c.Close()
		}
		if ctx.Err() != nil {
			t.Fatalf("geth --dev did not answer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer rc.Close()
	var accounts []common.Address
	if err := rc.CallContext(ctx, &accounts, "eth_accounts"); err != nil || len(accounts) == 0 {
		t.Fatalf("eth_accounts: %v %v", accounts, err)
	}
	dev := accounts[0]
	send := func(tx map[string]any) common.Hash {
		var h common.Hash
		tx["from"] = dev
		if err := rc.CallContext(ctx, &h, "eth_sendTransaction", tx); err != nil {
			t.Fatal(err)
		}
		return h
	}
	var sent []common.Hash
	for i := range 3 {
		sent = append(sent, send(map[string]any{"to": common.BigToAddress(common.Big1).Hex(), "value": hexutil.EncodeUint64(uint64(1000 + i))}))
	}
	create := send(map[string]any{"data": hexutil.Encode(transferInitCode()), "gas": hexutil.EncodeUint64(200_000)})
	sent = append(sent, create)
	ec := ethclient.NewClient(rc)
	for _, h := range sent {
		for {
			if _, err := ec.TransactionReceipt(ctx, h); err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("transaction %s never mined", h)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	checkTables(t, url, ec, strings.ToLower(dev.Hex()), create, len(sent))
}
