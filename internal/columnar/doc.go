// Package columnar is ethstream's one Parquet-to-column decoder: a reader
// names the columns it wants and their engine types (a []Field, its
// schema), Open plans them against a file's footer, and DecodeRowGroup
// turns each row group's pages into a stream.Batch, dictionary pages
// converted once per dictionary, nulls from the definition levels; a
// scalar string column whose chunk is all dictionary pages comes with its
// stream.Dict view (the indexes, the converted values). A
// field of type ARRAY<T> reads a Parquet LIST (three-level, two-level or a
// bare repeated leaf, list.go) into an Array column, null lists and null
// elements from the levels.
//
// rules.go holds the one table of conversions (timestamp units and
// isAdjustedToUTC, INT96, decimals) that every reader of Parquet in the
// repository applies: the archive source (sources/s3archive), the parquet
// file source and the Delta table source (through sources/internal/pqcol,
// which resolves their Spark schemas to Field paths), the Delta table's
// data files and its row-wise reader (sink/delta), and the demo's recount. The decoder is checked value by value against parquet-go's
// generic row reader on files written by other engines (the Delta golden
// tables) and on files covering every unit, decimal and null layout.
//
// A File is used by one goroutine; files are independent. A Pool (pool.go),
// safe for concurrent use, lets the files of a reader decode into the value
// slices of batches it is done with.
package columnar
