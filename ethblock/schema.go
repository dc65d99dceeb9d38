// Package ethblock is the Ethereum block schema: the column names and types
// that block sources (the Parquet archive, the JSON-RPC node) produce and that
// the reference query reads. The streaming engine knows none of these names;
// it sees only stream.Batch columns.
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
)

// Columns lists the seven block columns in their canonical order. A source
// handed no projection (nil) decodes all of them.
var Columns = []string{ColNumber, ColHash, ColParentHash, ColBlockTS, ColMiner, ColTransactionCount, ColGasUsed}

// ColumnType returns the type of a block column or of the engine's literal
// source column (stream.ColSource), and false for an unknown name.
func ColumnType(name string) (stream.Type, bool) {
	switch name {
	case ColNumber, ColTransactionCount, ColGasUsed:
		return stream.Int64, true
	case ColHash, ColParentHash, ColMiner, stream.ColSource:
		return stream.String, true
	case ColBlockTS:
		return stream.Timestamp, true
	}
	return 0, false
}
