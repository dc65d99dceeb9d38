package archivegen

import (
	"fmt"
	"io"
	"math/big"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
)

// The archive's tables besides blocks, named as the AWS dataset's
// directories under v1.0/eth.
const (
	TableBlocks         = "blocks"
	TableTransactions   = "transactions"
	TableLogs           = "logs"
	TableTokenTransfers = "token_transfers"
)

// Tables lists every table gen-archive can write, blocks first.
var Tables = []string{TableBlocks, TableTransactions, TableLogs, TableTokenTransfers}

// TablePrefix is a table's key prefix, as in the AWS dataset
// (v1.0/eth/transactions).
func TablePrefix(table string) string { return "v1.0/eth/" + table }

// ParseTables reads gen-archive's --tables: a comma-separated list of
// Tables or "all"; blocks is always written.
func ParseTables(s string) ([]string, error) {
	if s == "" || s == TableBlocks {
		return nil, nil
	}
	if s == "all" {
		return slices.Clone(Tables[1:]), nil
	}
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == TableBlocks:
		case slices.Contains(Tables, t):
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		default:
			return nil, errcode.New(errcode.InvalidArgument, "", "use --tables all or a list of "+strings.Join(Tables, ", "),
				"unknown table %q", t)
		}
	}
	return out, nil
}

// txRow is a transactions-table row: the AWS dataset's columns and types
// (docs/contracts.md, Data: "Transaction tables"). to_address is null for a
// contract creation, receipt_contract_address null otherwise,
// receipt_status null before Byzantium (the receipt held a state root),
// the two EIP-1559 fee caps null for other transaction types; gas_price is
// what eth_getTransactionByHash reports: the effective price for an
// EIP-1559 transaction.
type txRow struct {
	Hash                     string  `parquet:"hash"`
	Nonce                    int64   `parquet:"nonce"`
	TransactionIndex         int64   `parquet:"transaction_index"`
	FromAddress              string  `parquet:"from_address"`
	ToAddress                *string `parquet:"to_address,optional"`
	Value                    float64 `parquet:"value"`
	Gas                      int64   `parquet:"gas"`
	GasPrice                 int64   `parquet:"gas_price"`
	Input                    string  `parquet:"input"`
	ReceiptCumulativeGasUsed int64   `parquet:"receipt_cumulative_gas_used"`
	ReceiptGasUsed           int64   `parquet:"receipt_gas_used"`
	ReceiptContractAddress   *string `parquet:"receipt_contract_address,optional"`
	ReceiptStatus            *int64  `parquet:"receipt_status,optional"`
	BlockTimestamp           int64   `parquet:"block_timestamp,timestamp(microsecond)"`
	BlockNumber              int64   `parquet:"block_number"`
	BlockHash                string  `parquet:"block_hash,dict"`
	MaxFeePerGas             *int64  `parquet:"max_fee_per_gas,optional"`
	MaxPriorityFeePerGas     *int64  `parquet:"max_priority_fee_per_gas,optional"`
	TransactionType          int64   `parquet:"transaction_type"`
	ReceiptEffectiveGasPrice int64   `parquet:"receipt_effective_gas_price"`
}

// logRow is a logs-table row. topics is Spark's array<string>: a
// three-level LIST group (topics.list.element).
type logRow struct {
	LogIndex         int64    `parquet:"log_index"`
	TransactionHash  string   `parquet:"transaction_hash"`
	TransactionIndex int64    `parquet:"transaction_index"`
	Address          string   `parquet:"address,dict"`
	Data             string   `parquet:"data"`
	Topics           []string `parquet:"topics,list"`
	BlockTimestamp   int64    `parquet:"block_timestamp,timestamp(microsecond)"`
	BlockNumber      int64    `parquet:"block_number"`
	BlockHash        string   `parquet:"block_hash,dict"`
}

// tokenTransferRow is a token_transfers-table row: one per ERC-20
// Transfer log (three topics: the event, from, to; the amount in data),
// value the amount as a double.
type tokenTransferRow struct {
	TokenAddress    string  `parquet:"token_address,dict"`
	FromAddress     string  `parquet:"from_address"`
	ToAddress       string  `parquet:"to_address"`
	Value           float64 `parquet:"value"`
	TransactionHash string  `parquet:"transaction_hash"`
	LogIndex        int64   `parquet:"log_index"`
	BlockTimestamp  int64   `parquet:"block_timestamp,timestamp(microsecond)"`
	BlockNumber     int64   `parquet:"block_number"`
	BlockHash       string  `parquet:"block_hash,dict"`
}

func addrHex(a common.Address) string { return hexString(a[:]) }

func hashHex(h common.Hash) string { return hexString(h[:]) }

// bigFloat is a wei amount as the dataset's double: the nearest float64.
func bigFloat(v *big.Int) float64 {
	f, _ := new(big.Float).SetInt(v).Float64()
	return f
}

func i64(v *big.Int) *int64 { return ptr(v.Int64()) }

// txRows are the transactions-table rows of one block (hash the block's
// hash, body its body), in transaction order.
func txRows(h *types.Header, hash common.Hash, body *chain.Body) []txRow {
	out := make([]txRow, len(body.Txs))
	bh := hashHex(hash)
	ts := int64(h.Time) * 1_000_000
	for i, tx := range body.Txs {
		rc := body.Receipts[i]
		r := txRow{
			Hash: hashHex(rc.TxHash), Nonce: int64(tx.Nonce()), TransactionIndex: int64(i),
			FromAddress: addrHex(body.Senders[i]), Value: bigFloat(tx.Value()), Gas: int64(tx.Gas()),
			GasPrice: rc.EffectiveGasPrice.Int64(), Input: hexString(tx.Data()),
			ReceiptCumulativeGasUsed: int64(rc.CumulativeGasUsed), ReceiptGasUsed: int64(rc.GasUsed),
			BlockTimestamp: ts, BlockNumber: h.Number.Int64(), BlockHash: bh,
			TransactionType: int64(tx.Type()), ReceiptEffectiveGasPrice: rc.EffectiveGasPrice.Int64(),
		}
		if tx.Type() != types.DynamicFeeTxType {
			r.GasPrice = tx.GasPrice().Int64()
		}
		if to := tx.To(); to != nil {
			r.ToAddress = ptr(addrHex(*to))
		} else {
			r.ReceiptContractAddress = ptr(addrHex(rc.ContractAddress))
		}
		if len(rc.PostState) == 0 {
			r.ReceiptStatus = ptr(int64(rc.Status))
		}
		if tx.Type() == types.DynamicFeeTxType {
			r.MaxFeePerGas, r.MaxPriorityFeePerGas = i64(tx.GasFeeCap()), i64(tx.GasTipCap())
		}
		out[i] = r
	}
	return out
}

// logRows are the logs-table rows of one block, in log-index order.
func logRows(h *types.Header, hash common.Hash, body *chain.Body) []logRow {
	var out []logRow
	bh := hashHex(hash)
	for _, l := range body.Logs() {
		topics := make([]string, len(l.Topics))
		for k, t := range l.Topics {
			topics[k] = hashHex(t)
		}
		out = append(out, logRow{LogIndex: int64(l.Index), TransactionHash: hashHex(l.TxHash), TransactionIndex: int64(l.TxIndex),
			Address: addrHex(l.Address), Data: hexString(l.Data), Topics: topics,
			BlockTimestamp: int64(h.Time) * 1_000_000, BlockNumber: h.Number.Int64(), BlockHash: bh})
	}
	return out
}

// IsTokenTransfer is whether a log is an ERC-20 Transfer: the event's
// topic and exactly two indexed addresses (an ERC-721 Transfer indexes its
// token id too and has four topics).
func IsTokenTransfer(l *types.Log) bool {
	return len(l.Topics) == 3 && l.Topics[0] == chain.TransferTopic && len(l.Data) == 32
}

// tokenTransferRows are the token_transfers-table rows of one block: its
// ERC-20 Transfer logs, in log-index order.
func tokenTransferRows(h *types.Header, hash common.Hash, body *chain.Body) []tokenTransferRow {
	var out []tokenTransferRow
	bh := hashHex(hash)
	for _, l := range body.Logs() {
		if !IsTokenTransfer(l) {
			continue
		}
		out = append(out, tokenTransferRow{TokenAddress: addrHex(l.Address),
			FromAddress: addrHex(common.BytesToAddress(l.Topics[1][12:])), ToAddress: addrHex(common.BytesToAddress(l.Topics[2][12:])),
			Value: bigFloat(new(big.Int).SetBytes(l.Data)), TransactionHash: hashHex(l.TxHash), LogIndex: int64(l.Index),
			BlockTimestamp: int64(h.Time) * 1_000_000, BlockNumber: h.Number.Int64(), BlockHash: bh})
	}
	return out
}

// tableRowGroupRows is how many rows a table file's row group holds:
// rows stream from one block's body at a time, so a day of a million
// transactions never sits in memory, and Spark's 128 MB row groups hold
// about this many rows of the transactions table.
const tableRowGroupRows = 1 << 17

// tableSink streams one table's rows into its Parquet file.
type tableSink interface {
	add(h *types.Header, hash common.Hash, body *chain.Body) error
	close() error
	count() int64
}

type sink[T any] struct {
	w          *parquet.GenericWriter[T]
	rows       func(*types.Header, common.Hash, *chain.Body) []T
	n, inGroup int64
}

func newSink[T any](w io.Writer, rows func(*types.Header, common.Hash, *chain.Body) []T) *sink[T] {
	return &sink[T]{w: parquet.NewGenericWriter[T](w,
		parquet.NewSchema("spark_schema", parquet.SchemaOf(new(T))),
		parquet.Compression(&parquet.Snappy),
		parquet.CreatedBy("ethstream", "1", "chain"),
	), rows: rows}
}

func (s *sink[T]) add(h *types.Header, hash common.Hash, body *chain.Body) error {
	rows := s.rows(h, hash, body)
	if _, err := s.w.Write(rows); err != nil {
		return err
	}
	s.n += int64(len(rows))
	s.inGroup += int64(len(rows))
	if s.inGroup >= tableRowGroupRows {
		s.inGroup = 0
		return s.w.Flush()
	}
	return nil
}

func (s *sink[T]) close() error { return s.w.Close() }
func (s *sink[T]) count() int64 { return s.n }

func newTableSink(table string, w io.Writer) tableSink {
	switch table {
	case TableTransactions:
		return newSink(w, txRows)
	case TableLogs:
		return newSink(w, logRows)
	case TableTokenTransfers:
		return newSink(w, tokenTransferRows)
	}
	panic(fmt.Sprintf("archivegen: unknown table %q", table))
}

// EncodeTables publishes the tables' files of db (a linked day whose
// roots are its bodies', or any run of blocks of one date) at dsts, one
// per table, through durable (Replace: a rerun rewrites identical bytes),
// as EncodeDay does for blocks. body(i) is block i's body; each is made
// once and its rows streamed to every table's file. It returns each file's
// rows and bytes.
func EncodeTables(tables []string, db *chain.Day, body func(i int) *chain.Body, dsts []string) (rows, sizes []int64, err error) {
	e := &tableEncoder{tables: tables, db: db, body: body, dsts: dsts,
		sinks: make([]tableSink, len(tables)), rows: make([]int64, len(tables)), sizes: make([]int64, len(tables))}
	if err := e.publish(0); err != nil {
		return nil, nil, err
	}
	return e.rows, e.sizes, nil
}

// tableEncoder is one EncodeTables call: the files are published one
// inside the other (each table's write callback opens the next table's
// file), so a single pass over the blocks feeds them all.
type tableEncoder struct {
	tables      []string
	db          *chain.Day
	body        func(int) *chain.Body
	dsts        []string
	sinks       []tableSink
	rows, sizes []int64
}

func (e *tableEncoder) publish(k int) error {
	if k == len(e.tables) {
		for i, h := range e.db.Headers {
			b := e.body(i)
			for _, s := range e.sinks {
				if err := s.add(h, e.db.Hashes[i], b); err != nil {
					return err
				}
			}
		}
		return nil
	}
	dst := e.dsts[k]
	res, err := durable.For(vfs.Default).Publish(filepath.Dir(dst), filepath.Base(dst),
		durable.Options{Mode: durable.Replace, NoDirSync: true}, func(w io.Writer) error {
			e.sinks[k] = newTableSink(e.tables[k], w)
			if err := e.publish(k + 1); err != nil {
				return err
			}
			e.rows[k] = e.sinks[k].count()
			return e.sinks[k].close()
		})
	if err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	e.sizes[k] = res.Size
	return nil
}

// tableKey is the archive key of a table's day file: the blocks' key for
// blocks (unchanged, so a blocks-only archive keeps its bytes), otherwise
// the table's directory and a uuid of seed, table and date.
func tableKey(seed int64, table string, date time.Time) string {
	if table == TableBlocks {
		return fileKey(seed, date)
	}
	ds := date.Format(time.DateOnly)
	id := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "ethstream/%d/%s/%s", seed, table, ds))
	return path.Join(TablePrefix(table), "date="+ds, "part-00000-"+id.String()+"-c000.snappy.parquet")
}
