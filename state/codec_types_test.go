package state

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestTypedFields: every scalar type is a state field, recorded by its
// name, encoded by its class, keys order-preserving.
func TestTypedFields(t *testing.T) {
	types := []stream.Type{stream.Boolean, stream.Int8, stream.Int16, stream.Int32, stream.Date, stream.TimestampNTZ,
		stream.Float32, stream.Binary, stream.DecimalOf(38, 10), stream.DecimalOf(5, 0)}
	for _, typ := range types {
		f := Field{Name: "k", Type: typ, Nullable: encClass(typ) != stream.String}
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var back Field
		if err := json.Unmarshal(b, &back); err != nil || back != f {
			t.Fatalf("%s: %s read back as %+v, %v", typ, b, back, err)
		}
		if err := (Schema{OperatorName: "x", Key: []Field{f}}).validate(); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
	var f Field
	if err := json.Unmarshal([]byte(`{"name":"a","type":"array<int>"}`), &f); err == nil {
		t.Fatal("an array field read")
	}
	// Decimal keys order as their values, nulls first for a nullable float.
	dec := []Field{{Name: "d", Type: stream.DecimalOf(38, 2)}}
	vals := []int64{-1 << 62, -5, 0, 3, 1 << 62}
	var keys [][]byte
	for _, v := range vals {
		d := stream.Dec128Of(v)
		big, _ := d.Add(stream.Dec128{Hi: v >> 10})
		k := EncodeKeyRow(nil, dec, string(big.AppendKey(nil)))
		got, err := DecodeKey(dec, k)
		if err != nil || got[0].(string) != string(big.AppendKey(nil)) {
			t.Fatalf("%d: %v %v", v, got, err)
		}
		keys = append(keys, k)
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Fatal("decimal keys are not in value order")
	}
	fl := []Field{{Name: "f", Type: stream.Float32, Nullable: true}}
	kn, k1 := EncodeKeyRow(nil, fl, nil), EncodeKeyRow(nil, fl, float64(-1.5))
	if bytes.Compare(kn, k1) >= 0 {
		t.Fatal("a null float key does not sort first")
	}
	for _, k := range [][]byte{kn, k1} {
		got, err := DecodeKey(fl, k)
		want := []any{nil}
		if bytes.Equal(k, k1) {
			want = []any{-1.5}
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("float key %x: %v %v", k, got, err)
		}
	}
	if got := formatText(stream.DecimalOf(10, 2), string(stream.Dec128Of(-1234).AppendKey(nil))); got != "-12.34" {
		t.Fatalf("decimal text %q", got)
	}
}
