package demo

import (
	"bytes"
	"context"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/storage/s3serve"
)

// TestRealScriptsOffline runs scripts/real/02..08, the phases the README
// points at the public bucket and a mainnet endpoint, as written, with the
// embedded S3 endpoint (a bucket named aws-public-blockchain holding blocks
// and transactions) and the embedded node in their place: only the
// variables the scripts read change (S3_OPTIONS, RPC_URL, TRIGGER,
// CONFIRMATIONS, START_BLOCK, START_PARENT_HASH). It checks the blocks
// lifecycle's refusal and repartition, and that the transactions query
// (07, 08) counts every transaction of the archive, then every transaction
// of the live blocks it read (the node's, through go-ethereum's client).
func TestRealScriptsOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the real-endpoint scripts")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	ctx := context.Background()
	work := t.TempDir()
	root, bin := buildBinary(t, filepath.Join(work, "bin"))
	s3root := filepath.Join(work, "s3")
	m, err := archivegen.Generate(ctx, archivegen.Options{Out: filepath.Join(s3root, Bucket), Preset: chain.LastBlocksPreset(300),
		Seed: 1, Tables: ethtables.Names})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := s3serve.Start(ctx, s3serve.Options{Root: s3root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// 03, 04 and 05 read 16, 8 and 8 batches of 20 blocks; 08 reads 8.
	node, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 1, Addr: "127.0.0.1:0", Manual: true, InitialBlocks: 700})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	env := append(os.Environ(), "WORK="+filepath.Join(work, "real"), "ETHSTREAM_BIN="+bin, "RPC_URL="+node.URL(),
		"S3_OPTIONS=endpoint="+srv.URL()+"&region=us-east-2&anonymous=true", "TRIGGER=processing-time=50ms", "CONFIRMATIONS=0",
		"START_BLOCK="+strconv.FormatUint(m.LastBlock+1, 10), "START_PARENT_HASH="+m.LastHash)
	run := func(script string) string {
		t.Helper()
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "real", script))
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out.String())
		}
		return out.String()
	}
	t.Cleanup(func() {
		for _, p := range processesOf(bin) {
			syscall.Kill(p, syscall.SIGKILL)
			t.Errorf("the scripts left pid %d running", p)
		}
	})
	run("02_backfill.sh")
	run("03_add_live.sh")
	if out := run("04_retire_archive.sh"); !strings.Contains(out, "TOMBSTONE_SOURCE_NAME_REUSE") {
		t.Errorf("04 does not show the refused reuse:\n%s", out)
	}
	run("05_shrink_state.sh")
	if out := run("06_report.sh"); !strings.Contains(out, `"statePartitions": 8`) {
		t.Errorf("06 does not show 8 state partitions:\n%s", out)
	}

	txTable := filepath.Join(work, "real", "tx", "table")
	run("07_tx_backfill.sh")
	if got, want := tableTxs(t, bin, txTable), m.Tables[ethtables.Transactions].Rows; got != want {
		t.Fatalf("after 07 the table counts %d transactions, the archive holds %d", got, want)
	}
	out := run("08_tx_add_live.sh")
	ec, err := ethclient.Dial(node.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	// 8 batches of 20 blocks from START_BLOCK.
	live := int64(0)
	for n := m.LastBlock + 1; n <= m.LastBlock+160; n++ {
		b, err := ec.BlockByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		live += int64(len(b.Transactions()))
	}
	if got, want := tableTxs(t, bin, txTable), m.Tables[ethtables.Transactions].Rows+live; got != want || live == 0 {
		t.Fatalf("after 08 the table counts %d transactions, the archive and the 160 live blocks hold %d:\n%s", got, want, out)
	}
}

// tableTxs sums the txs column of the transactions query's table, as
// `ethstream table show` prints it (a header line, then CSV rows).
func tableTxs(t *testing.T, bin, table string) int64 {
	t.Helper()
	out, err := exec.Command(bin, "table", "show", table).Output()
	if err != nil {
		t.Fatalf("table show %s: %v", table, err)
	}
	var sum int64
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 || lines[0] != "window_start,window_end,transaction_type,txs,fees_gwei" {
		t.Fatalf("table show:\n%s", out)
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 5 {
			t.Fatalf("table show: %q", l)
		}
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			t.Fatalf("table show: %q", l)
		}
		sum += n
	}
	return sum
}
