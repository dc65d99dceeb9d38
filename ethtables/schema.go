package ethtables

import (
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethstream/ethstream/stream"
)

// Column is one engine column of a table: its name (the files' name too),
// type and nullability. Required columns are in every file of the table.
type Column struct {
	Name     string
	Type     stream.Type
	Nullable bool
}

// getter reads one column of a row of T: an integer (Int64, Timestamp),
// a double, a string or an array of strings; ok is false for a null.
type getter[T any] struct {
	Column
	i func(*T) (int64, bool)
	f func(*T) (float64, bool)
	s func(*T) (string, bool)
	a func(*T) ([]string, bool)
}

func col[T any](name string, typ stream.Type, nullable bool) getter[T] {
	return getter[T]{Column: Column{Name: name, Type: typ, Nullable: nullable}}
}

func (g getter[T]) ints(f func(*T) (int64, bool)) getter[T]     { g.i = f; return g }
func (g getter[T]) floats(f func(*T) (float64, bool)) getter[T] { g.f = f; return g }
func (g getter[T]) strs(f func(*T) (string, bool)) getter[T]    { g.s = f; return g }
func (g getter[T]) arrs(f func(*T) ([]string, bool)) getter[T]  { g.a = f; return g }

func some[V any](v V) (V, bool) { return v, true }

func opt[V any](p *V) (V, bool) {
	if p == nil {
		var zero V
		return zero, false
	}
	return *p, true
}

var txCols = []getter[Transaction]{
	col[Transaction]("hash", stream.String, false).strs(func(r *Transaction) (string, bool) { return some(r.Hash) }),
	col[Transaction]("nonce", stream.Int64, false).ints(func(r *Transaction) (int64, bool) { return some(r.Nonce) }),
	col[Transaction]("transaction_index", stream.Int64, false).ints(func(r *Transaction) (int64, bool) { return some(r.TransactionIndex) }),
	col[Transaction]("from_address", stream.String, false).strs(func(r *Transaction) (string, bool) { return some(r.FromAddress) }),
	col[Transaction]("to_address", stream.String, true).strs(func(r *Transaction) (string, bool) { return opt(r.ToAddress) }),
	col[Transaction]("value", stream.Float64, false).floats(func(r *Transaction) (float64, bool) { return some(r.Value) }),
	col[Transaction]("gas", stream.Int64, false).ints(func(r *Transaction) (int64, bool) { return some(r.Gas) }),
	col[Transaction]("gas_price", stream.Int64, false).ints(func(r *Transaction) (int64, bool) { return some(r.GasPrice) }),
	col[Transaction]("input", stream.String, false).strs(func(r *Transaction) (string, bool) { return some(r.Input) }),
	col[Transaction]("receipt_cumulative_gas_used", stream.Int64, false).ints(func(r *Transaction) (int64, bool) { return some(r.ReceiptCumulativeGasUsed) }),
	col[Transaction]("receipt_gas_used", stream.Int64, false).ints(func(r *Transaction) (int64, bool) { return some(r.ReceiptGasUsed) }),
	col[Transaction]("receipt_contract_address", stream.String, true).strs(func(r *Transaction) (string, bool) { return opt(r.ReceiptContractAddress) }),
	col[Transaction]("receipt_status", stream.Int64, true).ints(func(r *Transaction) (int64, bool) { return opt(r.ReceiptStatus) }),
	col[Transaction]("block_timestamp", stream.Timestamp, false).ints(func(r *Transaction) (int64, bool) { return some(r.BlockTimestamp) }),
	col[Transaction]("block_number", stream.Int64, false).ints(func(r *Transaction) (int64, bool) { return some(r.BlockNumber) }),
	col[Transaction]("block_hash", stream.String, false).strs(func(r *Transaction) (string, bool) { return some(r.BlockHash) }),
	col[Transaction]("max_fee_per_gas", stream.Int64, true).ints(func(r *Transaction) (int64, bool) { return opt(r.MaxFeePerGas) }),
	col[Transaction]("max_priority_fee_per_gas", stream.Int64, true).ints(func(r *Transaction) (int64, bool) { return opt(r.MaxPriorityFeePerGas) }),
	col[Transaction]("transaction_type", stream.Int64, false).ints(func(r *Transaction) (int64, bool) { return some(r.TransactionType) }),
	col[Transaction]("receipt_effective_gas_price", stream.Int64, false).ints(func(r *Transaction) (int64, bool) { return some(r.ReceiptEffectiveGasPrice) }),
}

// logCols: topics is array<string>, never null (a log without topics has
// an empty array), its elements never null.
var logCols = []getter[Log]{
	col[Log]("log_index", stream.Int64, false).ints(func(r *Log) (int64, bool) { return some(r.LogIndex) }),
	col[Log]("transaction_hash", stream.String, false).strs(func(r *Log) (string, bool) { return some(r.TransactionHash) }),
	col[Log]("transaction_index", stream.Int64, false).ints(func(r *Log) (int64, bool) { return some(r.TransactionIndex) }),
	col[Log]("address", stream.String, false).strs(func(r *Log) (string, bool) { return some(r.Address) }),
	col[Log]("data", stream.String, false).strs(func(r *Log) (string, bool) { return some(r.Data) }),
	col[Log]("topics", stream.ArrayOf(stream.String), false).arrs(func(r *Log) ([]string, bool) { return some(r.Topics) }),
	col[Log]("block_timestamp", stream.Timestamp, false).ints(func(r *Log) (int64, bool) { return some(r.BlockTimestamp) }),
	col[Log]("block_number", stream.Int64, false).ints(func(r *Log) (int64, bool) { return some(r.BlockNumber) }),
	col[Log]("block_hash", stream.String, false).strs(func(r *Log) (string, bool) { return some(r.BlockHash) }),
}

var transferCols = []getter[TokenTransfer]{
	col[TokenTransfer]("token_address", stream.String, false).strs(func(r *TokenTransfer) (string, bool) { return some(r.TokenAddress) }),
	col[TokenTransfer]("from_address", stream.String, false).strs(func(r *TokenTransfer) (string, bool) { return some(r.FromAddress) }),
	col[TokenTransfer]("to_address", stream.String, false).strs(func(r *TokenTransfer) (string, bool) { return some(r.ToAddress) }),
	col[TokenTransfer]("value", stream.Float64, false).floats(func(r *TokenTransfer) (float64, bool) { return some(r.Value) }),
	col[TokenTransfer]("transaction_hash", stream.String, false).strs(func(r *TokenTransfer) (string, bool) { return some(r.TransactionHash) }),
	col[TokenTransfer]("log_index", stream.Int64, false).ints(func(r *TokenTransfer) (int64, bool) { return some(r.LogIndex) }),
	col[TokenTransfer]("block_timestamp", stream.Timestamp, false).ints(func(r *TokenTransfer) (int64, bool) { return some(r.BlockTimestamp) }),
	col[TokenTransfer]("block_number", stream.Int64, false).ints(func(r *TokenTransfer) (int64, bool) { return some(r.BlockNumber) }),
	col[TokenTransfer]("block_hash", stream.String, false).strs(func(r *TokenTransfer) (string, bool) { return some(r.BlockHash) }),
}

func columnsOf[T any](gs []getter[T]) []Column {
	out := make([]Column, len(gs))
	for i, g := range gs {
		out[i] = g.Column
	}
	return out
}

// Columns is a table's engine columns in the files' order, false for a
// table this package does not know.
func Columns(table string) ([]Column, bool) {
	switch table {
	case Transactions:
		return columnsOf(txCols), true
	case Logs:
		return columnsOf(logCols), true
	case TokenTransfers:
		return columnsOf(transferCols), true
	}
	return nil, false
}

// StreamSchema is a table's schema as a source declares it
// (stream.Source.Schema); it panics for an unknown table.
func StreamSchema(table string) stream.Schema {
	cols, ok := Columns(table)
	if !ok {
		panic(fmt.Sprintf("ethtables: unknown table %q", table))
	}
	s := stream.Schema{Fields: make([]stream.Field, len(cols))}
	for i, c := range cols {
		s.Fields[i] = stream.Field{Name: c.Name, Type: c.Type, Nullable: c.Nullable}
	}
	return s
}

// RowSet accumulates one table's rows of several blocks, each row with a
// sign (+1 inserted, -1 retracted), for a source to emit in batches. It is
// not safe for concurrent use.
type RowSet struct {
	table     string
	txs       []Transaction
	logs      []Log
	transfers []TokenTransfer
	signs     []int8
}

// NewRowSet is an empty set of the table's rows; it panics for an
// unknown table.
func NewRowSet(table string) *RowSet {
	if _, ok := Columns(table); !ok {
		panic(fmt.Sprintf("ethtables: unknown table %q", table))
	}
	return &RowSet{table: table}
}

// Add appends a block's rows with sign and returns how many it added.
func (s *RowSet) Add(b Block, txs []*types.Transaction, senders []common.Address, receipts []*types.Receipt, sign int8) int {
	var n int
	switch s.table {
	case Transactions:
		rows := TransactionRows(b, txs, senders, receipts)
		s.txs, n = append(s.txs, rows...), len(rows)
	case Logs:
		rows := LogRows(b, receipts)
		s.logs, n = append(s.logs, rows...), len(rows)
	default:
		rows := TokenTransferRows(b, receipts)
		s.transfers, n = append(s.transfers, rows...), len(rows)
	}
	for range n {
		s.signs = append(s.signs, sign)
	}
	return n
}

// Len is the number of rows.
func (s *RowSet) Len() int { return len(s.signs) }

// Batch is rows lo..hi-1 with the projected columns cols (each a column of
// the table), Signs set when any row is retracted.
func (s *RowSet) Batch(cols []string, lo, hi int) *stream.Batch {
	var b *stream.Batch
	switch s.table {
	case Transactions:
		b = batchOf(s.txs[lo:hi], txCols, cols)
	case Logs:
		b = batchOf(s.logs[lo:hi], logCols, cols)
	default:
		b = batchOf(s.transfers[lo:hi], transferCols, cols)
	}
	for _, sg := range s.signs[lo:hi] {
		if sg < 0 {
			b.Signs = append([]int8(nil), s.signs[lo:hi]...)
			break
		}
	}
	return b
}

// batchOf builds the projected columns of rows.
func batchOf[T any](rows []T, gs []getter[T], cols []string) *stream.Batch {
	b := &stream.Batch{Len: len(rows), Columns: make([]stream.Column, 0, len(cols))}
	for _, name := range cols {
		var g *getter[T]
		for k := range gs {
			if gs[k].Name == name {
				g = &gs[k]
			}
		}
		if g == nil {
			panic(fmt.Sprintf("ethtables: no column %q", name))
		}
		if g.a != nil {
			b.Columns = append(b.Columns, arrayColumn(rows, g))
			continue
		}
		c := stream.Column{Name: name, Type: g.Type}
		valid := make([]bool, len(rows))
		nulls := false
		for i := range rows {
			var ok bool
			switch {
			case g.s != nil:
				var v string
				v, ok = g.s(&rows[i])
				c.Strings = append(c.Strings, v)
			case g.f != nil:
				var v float64
				v, ok = g.f(&rows[i])
				c.Float64s = append(c.Float64s, v)
			default:
				var v int64
				v, ok = g.i(&rows[i])
				c.Int64s = append(c.Int64s, v)
			}
			valid[i] = ok
			nulls = nulls || !ok
		}
		if nulls {
			c.Valid = valid
		}
		switch g.Type {
		case stream.String:
			if c.Strings == nil {
				c.Strings = []string{}
			}
		case stream.Float64:
			if c.Float64s == nil {
				c.Float64s = []float64{}
			}
		default:
			if c.Int64s == nil {
				c.Int64s = []int64{}
			}
		}
		b.Columns = append(b.Columns, c)
	}
	return b
}

// arrayColumn builds an array<string> column of rows.
func arrayColumn[T any](rows []T, g *getter[T]) stream.Column {
	c := stream.MakeColumn(g.Name, g.Type, 0, len(rows))
	nulls := false
	valid := make([]bool, len(rows))
	for i := range rows {
		v, ok := g.a(&rows[i])
		c.Elems.Strings = append(c.Elems.Strings, v...)
		c.Offsets = append(c.Offsets, int32(len(c.Elems.Strings)))
		valid[i] = ok
		nulls = nulls || !ok
	}
	if nulls {
		c.Valid = valid
	}
	return c
}
