package opbase

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// named renders an operator's plan in a failed commit's error.
type named string

func (n named) String() string { return string(n) }

var testSchema = state.Schema{OperatorName: "test", Spec: "format=1",
	Key:   []state.Field{{Name: "k", Type: stream.String}},
	Value: []state.Field{{Name: "v", Type: stream.Int64}}}

// TestLifecycle runs testdata/lifecycle: the batch lifecycle of an
// operator over a real store on a memory file system, as an operator
// drives it (the operator's one reference to its store is s):
//
//	open [version=N]   Open at version N (default -1)
//	begin id=N         Begin; prints whether the batch started
//	put k=K            a pending write of key K
//	finish             Finish
//	commit id=N        Commit; prints the progress figures it records
//	abort              Abort
//	repartition base=B id=N n=P
//	close              Close; the operator drops its store
//	state              Active and ID
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/ckpt/state/0", 0o755); err != nil {
		t.Fatal(err)
	}
	l := New("test op", named("test(plan)"))
	var s *state.Store
	defer func() { _ = l.Close(s) }()
	result := func(err error) string {
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return "ok\n"
	}
	datadriven.RunTest(t, "testdata/lifecycle", func(t *testing.T, d *datadriven.TestData) string {
		var id int64
		switch d.Cmd {
		case "open":
			version := int64(-1)
			d.MaybeScanArgs(t, "version", &version)
			env := stream.OperatorEnv{StateDir: "/ckpt/state/0", FS: fs, LocalDir: t.TempDir(), Partitions: 2, Version: version}
			st, logger, err := l.Open(ctx, s, env, state.Options{Schema: testSchema})
			if err == nil {
				s = st
				if logger == nil {
					t.Fatal("Open returned no logger")
				}
			}
			return result(err)
		case "begin":
			d.ScanArgs(t, "id", &id)
			started, err := l.Begin(s, id)
			if err != nil {
				return result(err)
			}
			return fmt.Sprintf("started=%t\n", started)
		case "put":
			var k string
			d.ScanArgs(t, "k", &k)
			if s == nil {
				t.Fatal("put on a closed operator")
			}
			return result(s.Put(state.AppendStringKey(nil, k), state.AppendInt64Value(nil, 1)))
		case "finish":
			l.Finish()
			return "ok\n"
		case "commit":
			d.ScanArgs(t, "id", &id)
			pr := stream.OperatorProgress{NumRowsTotal: -1, MemoryUsedBytes: -1}
			_, err := l.Commit(ctx, s, id, &pr)
			if err != nil {
				return result(err)
			}
			return fmt.Sprintf("numRowsTotal=%d memoryRecorded=%t\n", pr.NumRowsTotal, pr.MemoryUsedBytes > 0)
		case "abort":
			l.Abort(s)
			return "ok\n"
		case "repartition":
			var base int64
			var n int
			d.ScanArgs(t, "base", &base)
			d.ScanArgs(t, "id", &id)
			d.ScanArgs(t, "n", &n)
			st, err := l.Repartition(ctx, s, base, id, n)
			if err != nil {
				return result(err)
			}
			return fmt.Sprintf("keys %d -> %d, partitions %d -> %d\n", st.KeysBefore, st.KeysAfter, st.From, st.To)
		case "close":
			err := l.Close(s)
			s = nil
			return result(err)
		case "state":
			return fmt.Sprintf("active=%t id=%d\n", l.Active(), l.ID())
		}
		t.Fatalf("unknown command %s", d.Cmd)
		return ""
	})
}

// TestRefuseRetractions: a chunk with a retraction is RETRACTION_UNSUPPORTED
// with the operator's reason and the common remedy; without one, or with
// no signs at all, nil.
func TestRefuseRetractions(t *testing.T) {
	if err := RefuseRetractions(&stream.Batch{Len: 2}, "x"); err != nil {
		t.Fatal(err)
	}
	if err := RefuseRetractions(&stream.Batch{Len: 2, Signs: []int8{1, 1}}, "x"); err != nil {
		t.Fatal(err)
	}
	err := RefuseRetractions(&stream.Batch{Len: 2, Signs: []int8{1, -1}}, "%s: cannot undo", "op")
	if errcode.Code(err) != CodeRetractionUnsupported || !strings.Contains(err.Error(), "op: cannot undo") ||
		!strings.Contains(err.Error(), retractionRemedy) {
		t.Fatalf("got %v", err)
	}
}

// TestNewBatch: the empty batch has the schema's columns, in order, typed.
func TestNewBatch(t *testing.T) {
	s := stream.Schema{Fields: []stream.Field{{Name: "b", Type: stream.String}, {Name: "a", Type: stream.DecimalOf(20, 2)}}}
	b := NewBatch(s)
	if b.Len != 0 || len(b.Columns) != 2 || b.Columns[0].Name != "b" || b.Columns[1].Type != stream.DecimalOf(20, 2) {
		t.Fatalf("got %+v", b)
	}
}
