package archivegen

import (
	"fmt"
	"io"
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
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
)

// The archive's tables besides blocks, named as the AWS dataset's
// directories under v1.0/eth.
const (
	TableBlocks         = "blocks"
	TableTransactions   = ethtables.Transactions
	TableLogs           = ethtables.Logs
	TableTokenTransfers = ethtables.TokenTransfers
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

// The rows of a block of the model, through the one row function of
// package ethtables (the JSON-RPC source uses it too).
func blockOf(h *types.Header, hash common.Hash) ethtables.Block {
	return ethtables.Block{Number: h.Number.Uint64(), Hash: hash, Time: h.Time}
}

func txRows(h *types.Header, hash common.Hash, body *chain.Body) []ethtables.Transaction {
	return ethtables.TransactionRows(blockOf(h, hash), body.Txs, body.Senders, body.Receipts)
}

func logRows(h *types.Header, hash common.Hash, body *chain.Body) []ethtables.Log {
	return ethtables.LogRows(blockOf(h, hash), body.Receipts)
}

func tokenTransferRows(h *types.Header, hash common.Hash, body *chain.Body) []ethtables.TokenTransfer {
	return ethtables.TokenTransferRows(blockOf(h, hash), body.Receipts)
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
// per table on fs, through durable (Replace: a rerun rewrites identical bytes),
// as EncodeDay does for blocks. body(i) is block i's body; each is made
// once and its rows streamed to every table's file. It returns each file's
// rows and bytes.
func EncodeTables(fs vfs.FS, tables []string, db *chain.Day, body func(i int) *chain.Body, dsts []string) (rows, sizes []int64, err error) {
	e := &tableEncoder{fs: fs, tables: tables, db: db, body: body, dsts: dsts,
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
	fs          vfs.FS
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
	res, err := durable.For(e.fs).Publish(filepath.Dir(dst), filepath.Base(dst),
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
