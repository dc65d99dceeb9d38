package ethblock

import (
	"slices"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestSchema: every column resolves to its own type, names and archive
// names are unique, Core is Schema's prefix, and the nullable columns are
// exactly the fork-dependent ones plus total_difficulty.
func TestSchema(t *testing.T) {
	if !slices.Equal(Columns[:len(Core)], Core) || len(Columns) != len(Schema) || len(Schema) != 20 {
		t.Fatalf("Columns %v, Core %v", Columns, Core)
	}
	arch := map[string]bool{}
	var nullable []string
	for _, c := range Schema {
		if typ, ok := ColumnType(c.Name); !ok || typ != c.Type {
			t.Fatalf("%s: ColumnType %v %v, want %v", c.Name, typ, ok, c.Type)
		}
		if arch[c.Archive] {
			t.Fatalf("archive name %q twice", c.Archive)
		}
		arch[c.Archive] = true
		if c.Nullable {
			nullable = append(nullable, c.Name)
		}
	}
	if want := []string{ColTotalDifficulty, ColBaseFeePerGas, ColWithdrawalsRoot}; !slices.Equal(nullable, want) {
		t.Fatalf("nullable %v, want %v", nullable, want)
	}
	if typ, ok := ColumnType(stream.ColSource); !ok || typ != stream.String {
		t.Fatal("source column")
	}
	if _, ok := ColumnType("date"); ok {
		t.Fatal("date is a partition, not a column")
	}
	if _, ok := Lookup(stream.ColSource); ok {
		t.Fatal("source is not a block column")
	}
}
