package pipeline

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/sources/s3archive"
)

// TestArchiveAndLiveTableRowsAgree: for each table (transactions, logs,
// token_transfers), the rows of the node's blocks read from archive files
// (ethnode.Node.ExportTables, the archive writer's rows, read back by the
// s3archive source with the table's schema, the table named by its
// location) equal, in every column and order, the rows the ethrpc source
// emits with table= from the node's eth_getBlockByHash(hash, true) and
// eth_getBlockReceipts answers over go-ethereum's RPC on loopback; and the
// transactions are as many as the blocks' transaction_count. The logs'
// topics (array<string>) are compared element by element.
func TestArchiveAndLiveTableRowsAgree(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	m, err := archivegen.Generate(ctx, archivegen.Options{Out: filepath.Join(dir, "arch"), Preset: chain.LastDaysPreset(1), Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	node, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 3, Addr: "127.0.0.1:0", Manual: true, InitialBlocks: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	first, last := m.LastBlock+1, m.LastBlock+12
	exported := filepath.Join(dir, "exported")
	files, err := node.ExportTables(exported, first, last, ethtables.Names)
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range ethtables.Names {
		t.Run(table, func(t *testing.T) {
			cols := columnNames(table)
			arch, err := s3archive.New(s3archive.Options{URI: "file://" + filepath.ToSlash(exported) + "/v1.0/eth/" + table, Columns: TableArchiveColumns(table)})
			if err != nil {
				t.Fatal(err)
			}
			archive, _ := readRowsOf(t, arch, cols)
			liveSrc, err := ethrpc.New(ethrpc.Options{Endpoints: []string{node.URL()}, StartBlock: first, MaxBlocksPerTrigger: 5, Table: table, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer liveSrc.Close()
			live, _ := readRowsOf(t, liveSrc, cols)
			if len(archive) != len(live) || len(live) == 0 || int64(len(live)) != files[table][0].Rows {
				t.Fatalf("%d archive rows, %d live rows, the export wrote %d", len(archive), len(live), files[table][0].Rows)
			}
			for i := range live {
				if archive[i] != live[i] {
					t.Fatalf("row %d:\narchive %s\nlive    %s", i, archive[i], live[i])
				}
			}
			if table == ethtables.Transactions && !strings.Contains(live[0], " max_fee_per_gas=") {
				t.Fatalf("a transaction row without its fee cap column: %s", live[0])
			}
			if table == ethtables.Logs && !strings.Contains(strings.Join(live, "\n"), " topics=["+ethtables.TransferTopic.Hex()+", 0x") {
				t.Fatalf("no log row with an ERC-20 Transfer's topics: %s", live[0])
			}
		})
	}
	blockSrc, err := ethrpc.New(ethrpc.Options{Endpoints: []string{node.URL()}, StartBlock: first, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer blockSrc.Close()
	_, blocks := readRows(t, blockSrc)
	var want int64
	for _, b := range blocks {
		want += b["transaction_count"].(int64)
	}
	if got := files[ethtables.Transactions][0].Rows; got != want || len(blocks) != int(last-first+1) {
		t.Fatalf("%d transaction rows, the %d blocks' transaction_count sums to %d", got, len(blocks), want)
	}
}

func columnNames(table string) []string {
	cols, _ := ethtables.Columns(table)
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}
