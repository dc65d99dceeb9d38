package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/dedup"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/textwrap"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// PhaseOverlapSeam runs the reference query across a seam that overlaps on
// purpose: an archive whose last file holds the node's first SeamOverlap
// blocks too (the dataset's producer exported them, as it exports every
// day), and a live source started at the first of them, before the
// archive's last block (ethrpc overlap=K). The query deduplicates by
// block hash (--drop-duplicates-within-watermark hash), so each block is
// counted once; the proof is the query's own records (the deduplication's
// numDroppedDuplicateRows equals the overlap) and the table against an
// independent recount. It runs on a checkpoint and table of its own
// (<workdir>/seam), results in <results>/seam.
const PhaseOverlapSeam = "overlap_seam"

// seamBucket is the embedded endpoint's bucket of the phase's archive.
const seamBucket = "seam-archive"

// seamLiveBatches are the live batches of the phase's second start.
const seamLiveBatches = 4

// seamRun is one start of the phase.
type seamRun struct {
	name    string
	sources []pipeline.SourceSpec
	dedup   bool
	trigger engine.Trigger
	batches int
}

// runOverlapSeam builds the overlapping archive, runs the phase's three
// starts (the backfill, a start without the deduplication, refused, the
// live source added) and verifies them.
func runOverlapSeam(ctx context.Context, o Options, env *Env) ([]PhaseResult, []Check, []BatchRecord, error) {
	dir := filepath.Join(o.WorkDir, "seam")
	root := filepath.Join(o.WorkDir, "s3", seamBucket)
	for _, d := range []string{dir, root} {
		if err := os.RemoveAll(d); err != nil {
			return nil, nil, nil, fmt.Errorf("clear %s: %w", d, err)
		}
	}
	overlap := uint64(o.BlocksPerBatch / 2)
	files, last, lastHash, err := seamArchive(env, root, overlap)
	if err != nil {
		return nil, nil, nil, err
	}
	archive := pipeline.SourceSpec{Name: ArchiveSource, Format: "s3archive", URI: fmt.Sprintf(
		"s3://%s/v1.0/eth/blocks?endpoint=%s&region=us-east-2&anonymous=true&maxFilesPerTrigger=1", seamBucket, env.S3.URL())}
	live := pipeline.SourceSpec{Name: LiveSource, Format: "ethrpc", URI: fmt.Sprintf(
		"%s?maxBlocksPerTrigger=%d&start_block=%d&overlap=%d&start_parent_hash=%s&confirmations=0",
		env.Node.URL(), o.BlocksPerBatch, last+1, overlap, lastHash)}
	liveTrig := engine.Trigger{Kind: engine.ProcessingTime, Interval: o.TriggerInterval}
	runs := []seamRun{
		{PhaseOverlapSeam + "#1", []pipeline.SourceSpec{archive}, true, engine.Trigger{Kind: engine.AvailableNow}, 0},
		{PhaseOverlapSeam + "#2", []pipeline.SourceSpec{archive, live}, false, liveTrig, 1},
		{PhaseOverlapSeam + "#3", []pipeline.SourceSpec{archive, live}, true, liveTrig, seamLiveBatches},
	}
	var results []PhaseResult
	var phaseFiles []engine.PhaseFile
	var refusal error
	var before, after string
	for i, r := range runs {
		cfg := pipeline.Config{
			Checkpoint: filepath.Join(dir, "checkpoint"), Table: filepath.Join(dir, "table"),
			LocalDir: filepath.Join(dir, "state-cache"), Sources: r.sources, Conf: EvolutionConf(8),
			Trigger: r.trigger, MaxBatches: r.batches, Logger: o.Logger.With("phase", r.name),
			ProgressFile: filepath.Join(dir, fmt.Sprintf("progress-%d.jsonl", i+1)),
		}
		if r.dedup {
			cfg.DropDuplicatesWithinWatermark = "hash"
		}
		fmt.Fprintf(o.Out, "==> %s\n%s", r.name, commandLines("    ethstream", cfg.Args(), summaryWidth))
		refused := !r.dedup
		if refused {
			if before, err = TreeHash(cfg.Checkpoint); err != nil {
				return results, nil, nil, err
			}
		}
		t0 := time.Now()
		err := o.Runner.RunPhase(ctx, PhaseOverlapSeam, cfg)
		res := PhaseResult{Name: r.name, Conf: cfg.Conf, Trigger: trigString(r.trigger, r.batches), Err: err,
			Duration: time.Since(t0), Progress: cfg.ProgressFile}
		for _, s := range r.sources {
			res.Sources = append(res.Sources, s.Name)
		}
		results = append(results, res)
		if refused {
			refusal = err
			if after, err = TreeHash(cfg.Checkpoint); err != nil {
				return results, nil, nil, err
			}
			fmt.Fprint(o.Out, textwrap.Words("    "+r.name+": "+errString(refusal), "      ", summaryWidth))
			continue
		}
		if err != nil {
			fmt.Fprint(o.Out, textwrap.Words("    "+r.name+": "+err.Error(), "      ", summaryWidth))
			return results, nil, nil, fmt.Errorf("phase %s: %w", r.name, err)
		}
		phaseFiles = append(phaseFiles, engine.PhaseFile{Phase: r.name, Path: cfg.ProgressFile})
		fmt.Fprintf(o.Out, "    %s done in %s\n", r.name, res.Duration.Round(time.Millisecond))
	}
	v := seamVerify{o: o, env: env, dir: dir, root: root, files: files, last: last, overlap: overlap}
	checks, err := v.checks(ctx, phaseFiles, refusal, before, after)
	if err != nil {
		return results, nil, nil, err
	}
	batches, err := flattenInto(filepath.Join(o.ResultsDir, "seam"), phaseFiles)
	if err != nil {
		return results, nil, nil, err
	}
	return results, checks, batches, WriteChecks(filepath.Join(o.ResultsDir, "seam", "verification.csv"), checks)
}

func errString(err error) string {
	if err == nil {
		return "accepted (expected a refusal)"
	}
	return err.Error()
}

// seamArchive writes the phase's archive under root (a bucket of the
// embedded endpoint): the demo archive's last file, and the node's first
// overlap blocks exported as the dataset's producer would export them. It
// returns its files, and its last block and that block's hash read back
// from the exported file, as a user would read them from the archive.
func seamArchive(env *Env, root string, overlap uint64) ([]archivegen.ManifestFile, uint64, string, error) {
	m := env.Manifest
	if len(m.Files) == 0 || overlap == 0 {
		return nil, 0, "", fmt.Errorf("%s: no archive file or no overlap", PhaseOverlapSeam)
	}
	lastFile := m.Files[len(m.Files)-1]
	if err := copyFile(filepath.Join(env.ArchiveRoot, filepath.FromSlash(lastFile.Key)), filepath.Join(root, filepath.FromSlash(lastFile.Key))); err != nil {
		return nil, 0, "", err
	}
	exported, err := env.Node.ExportArchive(root, m.LastBlock+1, m.LastBlock+overlap)
	if err != nil {
		return nil, 0, "", err
	}
	files := append([]archivegen.ManifestFile{lastFile}, exported...)
	type block struct {
		Number int64  `parquet:"number"`
		Hash   string `parquet:"hash"`
	}
	var last block
	for _, f := range exported {
		rows, err := parquet.ReadFile[block](filepath.Join(root, filepath.FromSlash(f.Key)))
		if err != nil {
			return nil, 0, "", fmt.Errorf("read %s: %w", f.Key, err)
		}
		for _, b := range rows {
			if b.Number > last.Number {
				last = b
			}
		}
	}
	if uint64(last.Number) != m.LastBlock+overlap {
		return nil, 0, "", fmt.Errorf("%s: the exported archive ends at block %d, want %d", PhaseOverlapSeam, last.Number, m.LastBlock+overlap)
	}
	return files, uint64(last.Number), last.Hash, nil
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dst), err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer in.Close()
	// Published through package durable, as every file the demo writes.
	if err := writeFile(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	}); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}

// flattenInto writes the phase's progress as batches.csv and sources.csv
// in dir and reads the batches back.
func flattenInto(dir string, files []engine.PhaseFile) ([]BatchRecord, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	if err := engine.FlattenProgress(vfs.Default, dir, files); err != nil {
		return nil, err
	}
	return ReadBatches(filepath.Join(dir, "batches.csv"))
}

// seamVerify computes check 11 from the phase's records and table.
type seamVerify struct {
	o             Options
	env           *Env
	dir, root     string
	files         []archivegen.ManifestFile
	last, overlap uint64
}

func (v *seamVerify) checks(ctx context.Context, files []engine.PhaseFile, refusal error, before, after string) ([]Check, error) {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.Path
	}
	events, err := readEvents(paths)
	if err != nil {
		return nil, err
	}
	if len(events) != 2 {
		return nil, fmt.Errorf("%s: %d starts with progress, want 2", PhaseOverlapSeam, len(events))
	}
	// From the query's own records: the duplicates each start dropped,
	// the blocks the live source read, and its first and last block.
	dropped := make([]int64, 2)
	var liveRows int64
	var liveFirst, liveLast uint64
	for i, evs := range events {
		for _, ev := range evs {
			for _, op := range ev.StateOperators {
				if op.OperatorName == dedup.OperatorNameWithinWatermark {
					dropped[i] += op.CustomMetrics[dedup.MetricDroppedDuplicates]
				}
			}
			for _, s := range ev.Sources {
				if s.Name == nil || *s.Name != LiveSource || s.NumInputRows == 0 {
					continue
				}
				liveRows += s.NumInputRows
				end, ok, err := ethrpc.ParseOffset(stream.Offset(s.EndOffset))
				if err != nil || !ok {
					return nil, fmt.Errorf("%s: batch %d: eth_live end offset %q: %v", PhaseOverlapSeam, ev.BatchID, s.EndOffset, err)
				}
				if liveFirst == 0 {
					liveFirst = end.Block + 1 - uint64(s.NumInputRows)
				}
				liveLast = max(liveLast, end.Block)
			}
		}
	}
	snap, err := tableSnapshot(ctx, filepath.Join(v.dir, "table"), -1)
	if err != nil {
		return nil, err
	}
	var archiveRows int64
	for _, f := range v.files {
		archiveRows += f.Rows
	}
	raw, err := recount(ctx, v.root, v.files, v.env.Node.URL(), v.last+1, liveLast, 1024)
	if err != nil {
		return nil, err
	}
	cmp, err := compareTable(raw, func(fn func(tableRow) error) error { return scanTable(ctx, snap, fn) })
	if err != nil {
		return nil, err
	}
	counted := int64(liveLast - v.last)
	return []Check{
		check("11. overlap_seam: eth_live's first block = archive last block - overlap + 1",
			v.last-v.overlap+1, liveFirst),
		check("11. overlap_seam: without the deduplication, the overlapping source is refused",
			errcode.InvalidArgument, errcode.Code(refusal)),
		check("11. overlap_seam: the refused start left the checkpoint byte-identical", true, before == after && before != ""),
		check("11. overlap_seam: numDroppedDuplicateRows of the backfill", 0, dropped[0]),
		check("11. overlap_seam: numDroppedDuplicateRows after the live source was added = the overlap", v.overlap, dropped[1]),
		check("11. overlap_seam: blocks eth_live read = overlap + blocks past the archive",
			fmt.Sprintf("%d = %d + %d", v.overlap+uint64(counted), v.overlap, counted), fmt.Sprintf("%d = %d + %d", liveRows, liveRows-counted, counted)),
		check("11. overlap_seam: table sum(count) = archive blocks + live blocks past the archive",
			fmt.Sprintf("%d = %d + %d", archiveRows+counted, archiveRows, counted), fmt.Sprintf("%d = %d + %d", cmp.sum, archiveRows, cmp.sum-archiveRows)),
		check("11. overlap_seam: rows whose count differs from a recount (each block once)", 0, cmp.mismatch),
		check("11. overlap_seam: duplicate (window, source, miner) rows", 0, cmp.dups),
	}, nil
}
