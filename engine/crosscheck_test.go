package engine

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// auditingSource is memSource that audits its own offsets
// (stream.OffsetAuditor): it records what it was handed and answers err.
type auditingSource struct {
	memSource
	err  error
	seen []string
}

func (s *auditingSource) AuditOffset(_ context.Context, _ vfs.FS, metadataDir string, offset stream.Offset, offsetsPath string) error {
	s.seen = append(s.seen, metadataDir+" "+string(offset)+" "+offsetsPath)
	return s.err
}

// TestStartHandsEachSourceItsOffset: a start hands a source that audits
// its offsets (stream.OffsetAuditor) exactly the offset offsets/L records
// under its key, with its metadata directory and offsets/L's path, whatever
// the offset's shape; the source's refusal refuses Run and Plan before
// anything is written.
func TestStartHandsEachSourceItsOffset(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	w := &srcWorld{start: 100, available: 130, max: 10}
	table := newTable()
	query := func(src *auditingSource) Query {
		return Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource},
			Sources:  []NamedSource{{Name: "eth_live", Source: src}},
			Operator: &countOp{}, Sink: streamtest.Plain(table),
			Trigger: Trigger{Kind: AvailableNow}, Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"}}
	}
	first := &auditingSource{memSource: memSource{w: w, name: "eth_live"}}
	if _, err := Run(ctx, query(first), Options{FS: fs, CheckpointDir: "ck", LocalDir: "cache"}); err != nil {
		t.Fatal(err)
	}
	if len(first.seen) != 0 {
		t.Fatalf("a new checkpoint has no offset to audit; the source was handed %q", first.seen)
	}
	d := checkpoint.Dir{FS: fs, Path: "ck"}
	snap, err := d.ReadSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := d.Join(checkpoint.SourcesDir, "eth_live") + " " + string(snap.Latest.Sources[0].Offset) + " " + d.OffsetsPath(snap.LatestID)

	ok := &auditingSource{memSource: memSource{w: w, name: "eth_live"}}
	if _, err := Plan(ctx, query(ok), fs, "ck"); err != nil {
		t.Fatal(err)
	}
	if len(ok.seen) != 1 || ok.seen[0] != want {
		t.Fatalf("the source was handed %q, want [%q]", ok.seen, want)
	}

	before := treeHash(fs, "ck")
	bad := &auditingSource{memSource: memSource{w: w, name: "eth_live"}, err: errcode.Corrupt("ck/sources/eth_live", nil, "log behind")}
	_, runErr := Run(ctx, query(bad), Options{FS: fs, CheckpointDir: "ck", LocalDir: "cache"})
	_, planErr := Plan(ctx, query(bad), fs, "ck")
	if errcode.Code(runErr) != errcode.CheckpointCorrupt || errcode.Code(planErr) != errcode.CheckpointCorrupt {
		t.Fatalf("run %v, plan %v; want the source's CHECKPOINT_CORRUPT", runErr, planErr)
	}
	if treeHash(fs, "ck") != before {
		t.Fatal("the refused start changed the checkpoint")
	}
}
