package delta

import "github.com/ethstream/ethstream/stream"

// ReferenceSchema is the output schema of the reference query (blocks per
// window, source and miner), the schema of most tests' rows: its table is
// SinkSchema. Group columns are nullable, as the aggregation
// declares them.
func ReferenceSchema() stream.Schema {
	return stream.Schema{Fields: []stream.Field{
		{Name: KeyWindowStart, Type: stream.Timestamp}, {Name: KeyWindowEnd, Type: stream.Timestamp},
		{Name: "source", Type: stream.String, Nullable: true}, {Name: "miner", Type: stream.String, Nullable: true},
		{Name: "count", Type: stream.Int64},
	}, Key: []string{KeyWindowStart, KeyWindowEnd, "source", "miner"}}
}
