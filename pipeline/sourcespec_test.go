package pipeline

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sources/files"
	"github.com/ethstream/ethstream/stream"
)

// TestFileAndDeltaSourceSpecs: the issue's --source "orders=parquet:..."
// (INVALID_ARGUMENT "unknown format" before) builds a file source; without
// a schema it is refused with Spark's error unless the query's conf turns
// schema inference on; a delta: spec opens the table's log at build time.
func TestFileAndDeltaSourceSpecs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"order_id":"o1","amount":2.5}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loc := "file://" + filepath.ToSlash(dir)
	spec, err := ParseSourceSpec("orders=json:" + loc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSource(spec, nil); errcode.Code(err) != files.CodeSchemaRequired {
		t.Fatalf("no schema: %v", err)
	}
	src, err := newSource(spec, nil, nil, map[string]string{"spark.sql.streaming.schemaInference": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if got := src.Schema().String(); got != "amount float64 null, order_id string null" {
		t.Fatalf("inferred %s", got)
	}
	spec, err = ParseSourceSpec("orders=parquet:" + loc + "?schema=" + url.QueryEscape("order_id STRING, amount DOUBLE"))
	if err != nil {
		t.Fatal(err)
	}
	src, err = NewSource(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := stream.Schema{Fields: []stream.Field{{Name: "order_id", Type: stream.String, Nullable: true}, {Name: "amount", Type: stream.Float64, Nullable: true}}}
	if !src.Schema().Equal(want) {
		t.Fatalf("schema %v", src.Schema())
	}
	spec, err = ParseSourceSpec("orders_us=delta:" + loc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSource(spec, nil); errcode.Code(err) != "DELTA_TABLE_NOT_FOUND" {
		t.Fatalf("not a table: %v", err)
	}
	if _, err := ParseSourceSpec("x=avro:" + loc); err == nil || !strings.Contains(err.Error(), "parquet, json, csv or delta") {
		t.Fatalf("unknown format: %v", err)
	}
}
