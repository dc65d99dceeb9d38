package delta

import (
	"fmt"

	"github.com/ethstream/ethstream/internal/deltalog"
)

// The table schema (internal/deltalog defines it, for the Delta source too).
type (
	// Schema is a struct type: the table's columns.
	Schema = deltalog.Schema
	// Field is a column of a struct.
	Field = deltalog.Field
	// DataType is a Delta type: a primitive, a struct, an array or a map.
	DataType = deltalog.DataType
)

// SinkSchemaString is the schemaString of the table MergeSink writes, byte for
// byte what Spark writes for a DataFrame with these columns (docs/contracts.md, Delta table).
const SinkSchemaString = `{"type":"struct","fields":[` +
	`{"name":"window","type":{"type":"struct","fields":[` +
	`{"name":"start","type":"timestamp","nullable":true,"metadata":{}},` +
	`{"name":"end","type":"timestamp","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},` +
	`{"name":"source","type":"string","nullable":true,"metadata":{}},` +
	`{"name":"miner","type":"string","nullable":true,"metadata":{}},` +
	`{"name":"count","type":"long","nullable":true,"metadata":{}}]}`

// SinkSchema returns the parsed SinkSchemaString.
func SinkSchema() Schema {
	s, err := ParseSchema(SinkSchemaString)
	if err != nil {
		panic(fmt.Sprintf("sink schema constant does not parse: %v", err))
	}
	return s
}

// ParseSchema parses a schemaString.
func ParseSchema(s string) (Schema, error) { return deltalog.ParseSchema(s) }
