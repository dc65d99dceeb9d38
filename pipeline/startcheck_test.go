package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/storage/s3test"
)

// The start's belief table (docs/contracts.md, "What a start believes"):
// a query stopped after the damage archive's three data batches and the
// no-data batch that closes its last window (batches 0..3; the source log
// holds 0..2, the table versions 0..4), then one named edit of its checkpoint or table per row. A row a crash can leave
// (crash: true) restarts, re-runs what is uncommitted and ends with the
// table of a recount, and checkpoint verify finds nothing damaged in it; a
// row only damage can leave is refused with its code before anything is
// written (checkpoint and table byte-identical), checkpoint verify flags
// it too, and once the edit is undone the query finishes exact.

// beliefEdit is one edit: paths (relative to the copy's root, globs
// allowed) deleted, truncated to half, or created with the given content.
type beliefEdit struct {
	del, trunc []string
	create     map[string]string
}

type beliefRow struct {
	name  string
	edit  beliefEdit
	crash bool   // a state a crash leaves: the restart succeeds
	code  string // else the refusal's code
}

// stateV is the glob of state version v's files (metadata and data).
func stateV(v string) string { return "ck/state/0/000000000000000000" + v + ".*" }

// lastDeltaCommit is the table's newest commit (version 4: the table's
// creation, then one commit per batch).
const lastDeltaCommit = "table/_delta_log/00000000000000000004.json"

var beliefRows = []beliefRow{
	// What a crash leaves: offsets/N written, then state version N, the
	// table's txn N, commits/N, in that order; retention deletes offsets
	// before commits, oldest first; a publish killed midway leaves a temp
	// file.
	{name: "offsets, state and txn of batch 3 without its commit", crash: true,
		edit: beliefEdit{del: []string{"ck/commits/3"}}},
	{name: "offsets and state of batch 3, no txn, no commit", crash: true,
		edit: beliefEdit{del: []string{"ck/commits/3", lastDeltaCommit}}},
	{name: "offsets of batch 3 alone", crash: true,
		edit: beliefEdit{del: []string{"ck/commits/3", lastDeltaCommit, stateV("03")}}},
	{name: "retention deleted offsets 0 before commits 0", crash: true,
		edit: beliefEdit{del: []string{"ck/offsets/0"}}},
	{name: "source log entry of the next batch written, its offsets not", crash: true,
		edit: beliefEdit{del: []string{"ck/offsets/2", "ck/offsets/3", "ck/commits/2", "ck/commits/3",
			stateV("02"), stateV("03"), "table/_delta_log/00000000000000000003.json", lastDeltaCommit}}},
	{name: "temp files of killed publishes", crash: true,
		edit: beliefEdit{create: map[string]string{
			"ck/offsets/.4.0123456789abcdef.tmp": "partial", "ck/commits/.3.0123456789abcdef.tmp": "partial",
			"ck/.metadata.0123456789abcdef.tmp": "partial"}}},

	// What only damage leaves.
	{name: "every commit deleted", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/commits/*"}}},
	{name: "commits of batches 2 and 3 deleted", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/commits/2", "ck/commits/3"}}},
	{name: "commit log gap", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/commits/1"}}},
	{name: "first commit deleted under a later one", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/commits/0"}}},
	{name: "newest commit truncated", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{trunc: []string{"ck/commits/3"}}},
	{name: "offsets log gap", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/offsets/1"}}},
	{name: "newest offsets entry deleted under its commit", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/offsets/3"}}},
	{name: "newest offsets entry truncated", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{trunc: []string{"ck/offsets/3"}}},
	{name: "offsets and commit of batch 3 deleted under its state and txn", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/offsets/3", "ck/commits/3"}}},
	{name: "every offsets entry and commit deleted", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/offsets/*", "ck/commits/*"}}},
	{name: "every offsets entry, commit and state version deleted", code: errcode.CheckpointBehindTable,
		edit: beliefEdit{del: []string{"ck/offsets/*", "ck/commits/*", "ck/state/0/*"}}},
	{name: "metadata deleted", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/metadata"}}},
	{name: "metadata truncated", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{trunc: []string{"ck/metadata"}}},
	{name: "committed state version deleted", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{stateV("03")}}},
	{name: "state directory emptied", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/state/0/*"}}},
	{name: "committed state version truncated", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{trunc: []string{stateV("03")}}},
	{name: "newest Delta commit deleted", code: errcode.TableBehindCheckpoint,
		edit: beliefEdit{del: []string{lastDeltaCommit}}},
	{name: "newest Delta commit truncated", code: delta.CodeCorruptLog,
		edit: beliefEdit{trunc: []string{lastDeltaCommit}}},
	{name: "shape record truncated", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{trunc: []string{"ck/shape/0"}}},
	{name: "Delta commit gap", code: delta.CodeVersionGap,
		edit: beliefEdit{del: []string{"table/_delta_log/00000000000000000002.json"}}},
	{name: "newest source log entry deleted", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{del: []string{"ck/sources/" + flSource + "/2"}}},
	{name: "newest source log entry truncated", code: errcode.CheckpointCorrupt,
		edit: beliefEdit{trunc: []string{"ck/sources/" + flSource + "/2"}}},
}

func TestStartBelief(t *testing.T) {
	archive, err := damageArchive()
	if err != nil {
		t.Fatal(err)
	}
	want := recount(t, archive)
	base := t.TempDir()
	if err := damageRun(t, base, 0); err != nil {
		t.Fatal(err)
	}
	pristine := t.TempDir()
	copyTree(t, base, pristine)
	ck, table := filepath.Join(base, "ck"), filepath.Join(base, "table")
	for _, row := range beliefRows {
		t.Run(strings.ReplaceAll(row.name, " ", "_"), func(t *testing.T) {
			if err := os.RemoveAll(base); err != nil {
				t.Fatal(err)
			}
			copyTree(t, pristine, base)
			undo := applyEdit(t, base, row.edit)
			vr, err := Verify(context.Background(), vfs.Default, ck, table)
			if err != nil && row.crash {
				t.Fatalf("checkpoint verify: %v", err)
			}
			var report strings.Builder
			if vr != nil {
				vr.Print(&report)
			}
			switch {
			case row.crash && vr.Damaged > 0:
				t.Fatalf("checkpoint verify flags a state a crash leaves:\n%s", report.String())
			case !row.crash && err == nil && vr.Damaged == 0:
				t.Fatalf("checkpoint verify finds no damage:\n%s", report.String())
			}
			before := treeHash(t, ck, table)
			err = damageRun(t, base, 0)
			switch {
			case row.crash && err != nil:
				t.Fatalf("restart from a crash state: %v", err)
			case !row.crash && err == nil:
				t.Fatalf("restart succeeded, want %s", row.code)
			case !row.crash:
				if code := errcode.Code(err); code != row.code {
					t.Fatalf("want %s, got %v", row.code, err)
				}
				if after := treeHash(t, ck, table); after != before {
					t.Fatalf("a refused start changed files:\nbefore:\n%s\nafter:\n%s", before, after)
				}
				undo()
				if err := damageRun(t, base, 0); err != nil {
					t.Fatalf("restart once the edit is undone: %v", err)
				}
			}
			got, err := keyCounts(vfs.Default, table)
			if err != nil {
				t.Fatal(err)
			}
			if d := diffCounts(want, got); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// applyEdit applies e under root and returns what undoes it (every file
// it deleted or truncated restored, every file it created removed).
func applyEdit(t *testing.T, root string, e beliefEdit) (undo func()) {
	t.Helper()
	orig := map[string][]byte{}
	glob := func(pats []string) []string {
		var out []string
		for _, p := range pats {
			m, err := filepath.Glob(filepath.Join(root, p))
			if err != nil || len(m) == 0 {
				t.Fatalf("no file matches %s (%v)", p, err)
			}
			out = append(out, m...)
		}
		return out
	}
	for _, p := range glob(append(append([]string(nil), e.del...), e.trunc...)) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		orig[p] = b
	}
	for _, p := range glob(e.del) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range glob(e.trunc) {
		if err := os.WriteFile(p, orig[p][:len(orig[p])/2], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var created []string
	for rel, c := range e.create {
		p := filepath.Join(root, rel)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		created = append(created, p)
	}
	return func() {
		for p, b := range orig {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range created {
			_ = os.Remove(p)
		}
	}
}

// TestStartBeliefOnS3 is the commit log rows of TestStartBelief with the
// checkpoint and the table on each S3 server (the embedded endpoint and
// Versity), where an emptied commits/ is no directory at all: a commit
// log that lost more than its newest entry is refused before any write
// (the bucket's keys unchanged), the crash state restarts exact.
func TestStartBeliefOnS3(t *testing.T) {
	want := recount(t, mustArchive(t))
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		for _, row := range []struct {
			name  string
			del   func(key string) bool
			crash bool
		}{
			{"every commit deleted", func(k string) bool { return strings.Contains(k, "/checkpoint/commits/") }, false},
			{"every offsets entry and commit deleted", func(k string) bool {
				return strings.Contains(k, "/checkpoint/commits/") || strings.Contains(k, "/checkpoint/offsets/")
			}, false},
			{"newest commit deleted", func(k string) bool { return strings.HasSuffix(k, "/checkpoint/commits/1") }, true},
		} {
			t.Run(strings.ReplaceAll(row.name, " ", "_"), func(t *testing.T) {
				prefix := strings.ReplaceAll(row.name, " ", "-")
				cfg := s3Config(s.Location(prefix+"/checkpoint"), s.Location(prefix+"/table"), t.TempDir(), archiveURI(t))
				cfg.MaxBatches = 2
				if _, err := Run(context.Background(), cfg); err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, k := range s.Keys(t, prefix+"/") {
					if row.del(k) {
						if _, err := s.Client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(k)}); err != nil {
							t.Fatal(err)
						}
						n++
					}
				}
				if n == 0 {
					t.Fatal("nothing deleted")
				}
				before := strings.Join(s.Keys(t, prefix+"/"), "\n")
				cfg.MaxBatches = 0
				_, err := Run(context.Background(), cfg)
				if row.crash {
					if err != nil {
						t.Fatalf("restart from a crash state: %v", err)
					}
					if d := diffCounts(want, locTableCounts(t, cfg.Table)); d != "" {
						t.Fatal(d)
					}
					return
				}
				if !errcode.Is(err, errcode.CheckpointCorrupt) {
					t.Fatalf("restart: %v, want %s", err, errcode.CheckpointCorrupt)
				}
				if after := strings.Join(s.Keys(t, prefix+"/"), "\n"); after != before {
					t.Fatalf("a refused start changed keys:\n%s\nvs\n%s", before, after)
				}
			})
		}
	})
}
