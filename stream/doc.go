// Package stream is the leaf of ethstream: the streaming data model and the
// contracts between the engine and its plugins. It holds columnar batches
// (Batch, Column, Type), output schemas (Schema), source offsets, the Source,
// Operator and Sink interfaces with the environments the engine hands them,
// the processing-time Clock, and the StreamingQueryProgress types. It imports
// nothing of ethstream and knows no domain: the Ethereum block schema lives in
// package ethblock.
//
// # Retractions (signed rows)
//
// A batch may carry retractions (Batch.Signs). The contract, shared by every
// source, operator and sink:
//
//   - A source emits a retraction only for a row it emitted in an earlier,
//     committed batch, with identical column values, and emits it before the
//     insertions that replace it, in the same batch. The end offset of that
//     batch records the new position (for a chain: the new canonical tip), so
//     a re-run of the batch retracts and re-inserts exactly the same rows.
//   - The engine passes signs through unchanged; numInputRows counts every
//     row, retractions included.
//   - An operator applies a retraction as the inverse of the insertion: count
//     and sum subtract; min and max must keep enough to undo (or the operator
//     refuses the query at New with a coded error saying why). A retraction
//     whose event time is behind the watermark is late like any late row: it
//     is counted (numRowsDroppedByWatermark and a custom metric), never
//     applied to evicted state.
//   - A source that may emit retractions implements RetractingSource, so
//     the query's builder can tell the operator before the first batch.
//   - An operator's output row with sign -1 deletes the row with that key
//     from the sink (a group whose count reached zero); only its key columns
//     are meaningful. Sinks that cannot delete refuse such a batch.
//
// # Types
//
// Type covers Spark's scalar types and array<T> (batch.go): each kind's
// values live in one of Column's slices (Type.Storage), DECIMAL(p,s) as
// 128-bit unscaled Decimals, an array as Arrow's list: Offsets into a child
// column Elems of the element type. A source of array<string>, say log
// topics, builds
//
//	topics := stream.MakeColumn("topics", stream.ArrayOf(stream.String), 0, n)
//	// per row: append the elements to topics.Elems, then the end offset
//	topics.Elems.Strings = append(topics.Elems.Strings, "0xddf2...", "0x0000...")
//	topics.Offsets = append(topics.Offsets, int32(len(topics.Elems.Strings)))
//
// (a null array: Valid[i] false and no elements). The kernels (kernel.go)
// copy every type; Batch.Validate checks the offsets.
//
// # Dictionary views
//
// A String or Binary column may come with its producer's dictionary view
// (Column.Dict, made by NewDict, read through DictView): each row's index
// into the column's distinct values, its string being that value's. The
// Parquet decoder sets it on a dictionary-encoded column chunk and the
// engine on the literal source column; the aggregation interns and hashes
// each value once per chunk and finds a row's group by its indexes. A
// consumer may ignore it. Whatever changes a column's rows carries it
// (the kernels: Take, Filter, Slice) or drops it (an append, a column
// built anew); a copy of a Column that replaces its Strings keeps a view
// DictView ignores. A step that keeps a column's Strings with other
// validity sets Dict to nil, and no one rewrites a viewed column's strings
// in place (a Transform modifies nothing of its input).
//
// # Schemas
//
// An operator that knows its output before the first batch implements
// SchemaOperator; the engine hands that schema to Sink.Open (SinkEnv), so a
// sink creates its table from the query's output, or refuses an existing
// table whose schema differs, before any batch runs. Schema.Key names the
// columns that identify a row across batches: the sink's MERGE keys.
package stream
