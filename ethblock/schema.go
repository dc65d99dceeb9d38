// Package ethblock is the Ethereum block schema: the column names, types and
// nullability that block sources (the Parquet archive, the JSON-RPC node)
// produce and that queries read. The streaming engine knows none of these
// names; it sees only stream.Batch columns.
//
// The columns are those of the AWS public blockchain dataset's blocks table
// (s3://aws-public-blockchain/v1.0/eth/blocks, its published schema: date
// partition, then timestamp .. base_fee_per_gas), with the archive's
// timestamp named block_ts (the event time), plus withdrawals_root, which
// the archive ethstream writes carries from the Shanghai day on. The
// dataset's date is a partition directory (date=YYYY-MM-DD), not a column of
// its files, and is not a block column; blob_gas_used, excess_blob_gas and
// parent_beacon_block_root are not columns of the dataset, so they are not
// block columns either (docs/contracts.md, Data: "Block rows").
package ethblock

import "github.com/ethstream/ethstream/stream"

// Block columns. Sources of block data produce these names and types.
const (
	ColNumber           = "number"            // Int64
	ColHash             = "hash"              // String, 0x-hex
	ColParentHash       = "parent_hash"       // String, 0x-hex
	ColBlockTS          = "block_ts"          // Timestamp (event time)
	ColMiner            = "miner"             // String, 0x-hex, lowercase
	ColTransactionCount = "transaction_count" // Int64
	ColGasUsed          = "gas_used"          // Int64

	ColNonce            = "nonce"             // String, 0x-hex, 8 bytes
	ColSha3Uncles       = "sha3_uncles"       // String, 0x-hex, 32 bytes
	ColLogsBloom        = "logs_bloom"        // String, 0x-hex, 256 bytes
	ColTransactionsRoot = "transactions_root" // String, 0x-hex, 32 bytes
	ColStateRoot        = "state_root"        // String, 0x-hex, 32 bytes
	ColReceiptsRoot     = "receipts_root"     // String, 0x-hex, 32 bytes
	ColDifficulty       = "difficulty"        // Float64 (double in the dataset)
	ColTotalDifficulty  = "total_difficulty"  // Float64, nullable
	ColSize             = "size"              // Int64, bytes
	ColExtraData        = "extra_data"        // String, 0x-hex, 0..32 bytes
	ColGasLimit         = "gas_limit"         // Int64
	ColBaseFeePerGas    = "base_fee_per_gas"  // Int64, nullable (before London)
	ColWithdrawalsRoot  = "withdrawals_root"  // String, 0x-hex, nullable (before Shanghai)
)

// Column describes one block column.
type Column struct {
	Name string
	Type stream.Type
	// Nullable columns may hold nulls: base_fee_per_gas before London,
	// withdrawals_root before Shanghai, total_difficulty when a node does
	// not report it (go-ethereum stopped in v1.14.9). Every other column is
	// non-null from both sources.
	Nullable bool
	// Archive is the column's name in the archive's Parquet files.
	Archive string
	// Required columns are in every archive file (a file without one is
	// unreadable); the others a file may lack (base_fee_per_gas before
	// the London day's files) and read as nulls.
	Required bool
	// Repeats marks a string column with few distinct values (the
	// miners: a few thousand over the chain's history), which a reader
	// may intern.
	Repeats bool
}

// Schema lists every block column: the seven of Core first, in their
// historical order, then the others in the archive's column order.
var Schema = []Column{
	{Name: ColNumber, Type: stream.Int64, Required: true, Archive: "number"},
	{Name: ColHash, Type: stream.String, Required: true, Archive: "hash"},
	{Name: ColParentHash, Type: stream.String, Required: true, Archive: "parent_hash"},
	{Name: ColBlockTS, Type: stream.Timestamp, Required: true, Archive: "timestamp"},
	{Name: ColMiner, Type: stream.String, Required: true, Repeats: true, Archive: "miner"},
	{Name: ColTransactionCount, Type: stream.Int64, Archive: "transaction_count"},
	{Name: ColGasUsed, Type: stream.Int64, Archive: "gas_used"},
	{Name: ColNonce, Type: stream.String, Archive: "nonce"},
	{Name: ColSha3Uncles, Type: stream.String, Archive: "sha3_uncles"},
	{Name: ColLogsBloom, Type: stream.String, Archive: "logs_bloom"},
	{Name: ColTransactionsRoot, Type: stream.String, Archive: "transactions_root"},
	{Name: ColStateRoot, Type: stream.String, Archive: "state_root"},
	{Name: ColReceiptsRoot, Type: stream.String, Archive: "receipts_root"},
	{Name: ColDifficulty, Type: stream.Float64, Archive: "difficulty"},
	{Name: ColTotalDifficulty, Type: stream.Float64, Nullable: true, Archive: "total_difficulty"},
	{Name: ColSize, Type: stream.Int64, Archive: "size"},
	{Name: ColExtraData, Type: stream.String, Archive: "extra_data"},
	{Name: ColGasLimit, Type: stream.Int64, Archive: "gas_limit"},
	{Name: ColBaseFeePerGas, Type: stream.Int64, Nullable: true, Archive: "base_fee_per_gas"},
	{Name: ColWithdrawalsRoot, Type: stream.String, Nullable: true, Archive: "withdrawals_root"},
}

// Core lists the seven columns every block source has produced since the
// first on-disk formats (the reference query reads block_ts and miner of
// them); Schema starts with them. A version-1 ethrpc history records only
// these.
var Core = []string{ColNumber, ColHash, ColParentHash, ColBlockTS, ColMiner, ColTransactionCount, ColGasUsed}

// Columns lists every block column's name, in Schema's order. A source
// handed no projection (nil) decodes all of them.
var Columns = func() []string {
	out := make([]string, len(Schema))
	for i, c := range Schema {
		out[i] = c.Name
	}
	return out
}()

var byName = func() map[string]Column {
	m := make(map[string]Column, len(Schema))
	for _, c := range Schema {
		m[c.Name] = c
	}
	return m
}()

// Lookup returns the block column named name (not stream.ColSource).
func Lookup(name string) (Column, bool) {
	c, ok := byName[name]
	return c, ok
}

// ColumnType returns the type of a block column or of the engine's literal
// source column (stream.ColSource), and false for an unknown name.
func ColumnType(name string) (stream.Type, bool) {
	if name == stream.ColSource {
		return stream.String, true
	}
	c, ok := byName[name]
	return c.Type, ok
}

// StreamSchema is the block schema as a source declares it
// (stream.Source.Schema): every block column in Schema's order, no key.
func StreamSchema() stream.Schema {
	s := stream.Schema{Fields: make([]stream.Field, len(Schema))}
	for i, c := range Schema {
		s.Fields[i] = stream.Field{Name: c.Name, Type: c.Type, Nullable: c.Nullable}
	}
	return s
}
