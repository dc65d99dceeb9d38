package archivegen

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/parquet-go/parquet-go"
)

// readParquet decodes every row of a Parquet file into T, matching columns
// by name (as a reader of the dataset would).
func readParquet[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	r := parquet.NewGenericReader[T](f)
	defer r.Close()
	out := make([]T, pf.NumRows())
	n, err := r.Read(out)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return out[:n]
}

// readTx is what a reader decodes of a transactions file.
type readTx struct {
	Hash             string  `parquet:"hash"`
	TransactionIndex int64   `parquet:"transaction_index"`
	ToAddress        *string `parquet:"to_address,optional"`
	ReceiptGasUsed   int64   `parquet:"receipt_gas_used"`
	ReceiptCumGas    int64   `parquet:"receipt_cumulative_gas_used"`
	ReceiptContract  *string `parquet:"receipt_contract_address,optional"`
	ReceiptStatus    *int64  `parquet:"receipt_status,optional"`
	BlockNumber      int64   `parquet:"block_number"`
	BlockHash        string  `parquet:"block_hash"`
	BlockTimestamp   int64   `parquet:"block_timestamp"`
	TransactionType  int64   `parquet:"transaction_type"`
	MaxFeePerGas     *int64  `parquet:"max_fee_per_gas,optional"`
}

// TestArchiveTablesConsistent generates two days with every table and
// checks them against the blocks: sum(transaction_count) equals the
// transactions' rows, every transaction's block_hash is a block of the
// archive and its gas adds up to the block's gas_used, logs and token
// transfers point at transactions of the archive, every Transfer log is a
// token transfer, and the manifest vouches for each table's files.
func TestArchiveTablesConsistent(t *testing.T) {
	p := chain.RangePreset(time.Date(2015, 10, 1, 0, 0, 0, 0, time.UTC), 2)
	dir := t.TempDir()
	tables, err := ParseTables("all")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Generate(context.Background(), Options{Out: dir, Preset: p, Seed: 3, Tables: tables})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	blocks := checkArchive(t, dir, m2)
	byHash := map[string]readRow{}
	var txCount int64
	gas := map[string]int64{}
	for _, b := range blocks {
		byHash[b.Hash] = b
		txCount += b.TransactionCount
	}
	txs := map[string]readTx{}
	var txRows int64
	for i, f := range m.Tables[TableTransactions].Files {
		if !strings.HasPrefix(f.Key, "v1.0/eth/transactions/date="+m.Files[i].Date+"/part-00000-") {
			t.Fatalf("key %s", f.Key)
		}
		rows := readParquet[readTx](t, filepath.Join(dir, f.Key))
		if int64(len(rows)) != f.Rows {
			t.Fatalf("%s: %d rows, manifest %d", f.Key, len(rows), f.Rows)
		}
		for _, r := range rows {
			b, ok := byHash[r.BlockHash]
			if !ok || b.Number != r.BlockNumber || b.Timestamp.UnixMicro() != r.BlockTimestamp {
				t.Fatalf("transaction %s: block %d %s is not a block of the archive", r.Hash, r.BlockNumber, r.BlockHash)
			}
			gas[r.BlockHash] += r.ReceiptGasUsed
			if r.ReceiptCumGas != gas[r.BlockHash] || r.ReceiptStatus != nil || r.TransactionType != 0 || r.MaxFeePerGas != nil {
				t.Fatalf("transaction %s: cumulative gas %d (sum %d), status %v (null before Byzantium), type %d", r.Hash, r.ReceiptCumGas, gas[r.BlockHash], r.ReceiptStatus, r.TransactionType)
			}
			if (r.ToAddress == nil) == (r.ReceiptContract == nil) {
				t.Fatalf("transaction %s: to %v, contract %v", r.Hash, r.ToAddress, r.ReceiptContract)
			}
			txs[r.Hash] = r
			txRows++
		}
	}
	if txRows != txCount || txRows != m.Tables[TableTransactions].Rows || txRows == 0 {
		t.Fatalf("%d transaction rows, blocks' transaction_count sums to %d, manifest %d", txRows, txCount, m.Tables[TableTransactions].Rows)
	}
	for h, b := range byHash {
		if gas[h] != b.GasUsed {
			t.Fatalf("block %d: transactions use %d gas, gas_used %d", b.Number, gas[h], b.GasUsed)
		}
	}
	type readLog struct {
		LogIndex        int64    `parquet:"log_index"`
		TransactionHash string   `parquet:"transaction_hash"`
		Address         string   `parquet:"address"`
		Data            string   `parquet:"data"`
		Topics          []string `parquet:"topics,list"`
		BlockHash       string   `parquet:"block_hash"`
	}
	transfers := 0
	for _, f := range m.Tables[TableLogs].Files {
		for _, l := range readParquet[readLog](t, filepath.Join(dir, f.Key)) {
			if tx, ok := txs[l.TransactionHash]; !ok || tx.BlockHash != l.BlockHash || len(l.Topics) == 0 {
				t.Fatalf("log %d of %s: no such transaction in block %s (topics %v)", l.LogIndex, l.TransactionHash, l.BlockHash, l.Topics)
			}
			if l.Topics[0] == chain.TransferTopic.Hex() && len(l.Topics) == 3 {
				transfers++
			}
		}
	}
	type readTransfer struct {
		TokenAddress    string  `parquet:"token_address"`
		FromAddress     string  `parquet:"from_address"`
		Value           float64 `parquet:"value"`
		TransactionHash string  `parquet:"transaction_hash"`
		BlockHash       string  `parquet:"block_hash"`
	}
	var tt int
	for _, f := range m.Tables[TableTokenTransfers].Files {
		for _, r := range readParquet[readTransfer](t, filepath.Join(dir, f.Key)) {
			if tx, ok := txs[r.TransactionHash]; !ok || tx.BlockHash != r.BlockHash || !common.IsHexAddress(r.FromAddress) || r.Value <= 0 {
				t.Fatalf("token transfer %+v: not of a transaction of the archive", r)
			}
			tt++
		}
	}
	if tt != transfers || tt == 0 {
		t.Fatalf("%d token transfers, %d Transfer logs", tt, transfers)
	}
}

// TestArchiveTablesSchema: the files' schemas are the dataset's: column
// names, order and physical types, topics as Spark's three-level
// array<string>.
func TestArchiveTablesSchema(t *testing.T) {
	want := map[string]string{
		TableTransactions:   "hash nonce transaction_index from_address to_address value gas gas_price input receipt_cumulative_gas_used receipt_gas_used receipt_contract_address receipt_status block_timestamp block_number block_hash max_fee_per_gas max_priority_fee_per_gas transaction_type receipt_effective_gas_price",
		TableLogs:           "log_index transaction_hash transaction_index address data topics.list.element block_timestamp block_number block_hash",
		TableTokenTransfers: "token_address from_address to_address value transaction_hash log_index block_timestamp block_number block_hash",
	}
	for table, cols := range want {
		var got []string
		s := parquetSchemaOf(table)
		for _, c := range s.Columns() {
			got = append(got, strings.Join(c, "."))
		}
		if strings.Join(got, " ") != cols {
			t.Fatalf("%s columns:\n%s\nwant\n%s", table, strings.Join(got, " "), cols)
		}
	}
	topics, _ := parquetSchemaOf(TableLogs).Lookup("topics", "list", "element")
	if topics.Node.Type().Kind() != parquet.ByteArray || topics.MaxRepetitionLevel != 1 {
		t.Fatalf("topics element %v", topics.Node.Type())
	}
	if s := parquetSchemaOf(TableLogs).String(); !strings.Contains(s, "group topics (LIST) {\n\t\trepeated group list {\n\t\t\trequired binary element (STRING);") {
		t.Fatalf("topics is not Spark's three-level LIST:\n%s", s)
	}
}

func parquetSchemaOf(table string) *parquet.Schema {
	switch table {
	case TableTransactions:
		return parquet.SchemaOf(new(ethtables.Transaction))
	case TableLogs:
		return parquet.SchemaOf(new(ethtables.Log))
	}
	return parquet.SchemaOf(new(ethtables.TokenTransfer))
}

// TestLastBlocksPreset: a window inside the last day writes only its
// blocks, linked from the window's anchor, and the manifest reads back.
func TestLastBlocksPreset(t *testing.T) {
	p := chain.LastBlocksPreset(30)
	dir := t.TempDir()
	m, err := Generate(context.Background(), Options{Out: dir, Preset: p, Seed: 4, Tables: []string{TableTransactions}})
	if err != nil {
		t.Fatal(err)
	}
	if m.FirstBlock != chain.LastBlockNumber-29 || m.Rows != 30 || m.Files[0].FirstBlock != m.FirstBlock {
		t.Fatalf("manifest blocks %d..%d, %d rows, file from %d", m.FirstBlock, m.LastBlock, m.Rows, m.Files[0].FirstBlock)
	}
	if _, err := ReadManifest(dir); err != nil {
		t.Fatal(err)
	}
	checkArchive(t, dir, m)
}
