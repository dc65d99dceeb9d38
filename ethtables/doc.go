// Package ethtables is the schema of the AWS public blockchain dataset's
// tables besides blocks (package ethblock): transactions, logs and
// token_transfers. It holds each table's row type (with the Parquet tags
// the archive writer uses), the function that derives a block's rows from
// go-ethereum's transactions and receipts, and the table's engine schema,
// so that the archive writer (chain/archivegen) and the JSON-RPC source
// (sources/ethrpc) produce the same row for the same transaction by one
// code path, and the archive source (sources/s3archive) reads the same
// columns back.
//
// Columns and types are the dataset's published ones (docs/contracts.md,
// Data: "Transaction tables"): bigint as int64, double as float64,
// timestamp as TIMESTAMP(MICROS), strings as lowercase 0x-hex. Engine
// column names are the files' names (block_timestamp is the event time).
// topics is array<string> (an Array column of strings): written as a
// three-level LIST, read back by the archive source through the shared
// Parquet decoder (internal/columnar), built by the live source from the
// receipts' logs.
package ethtables
