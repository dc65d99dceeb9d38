package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/textwrap"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/spf13/cobra"
)

// checkpointCmd is the `checkpoint` parent command; other files add
// subcommands to it (e.g. `checkpoint repartition`) in their init.
var checkpointCmd = &cobra.Command{
	Use:   "checkpoint",
	Short: "Inspect, verify and repartition a query's checkpoint (inspect, verify, repartition)",
	Long: `checkpoint works on the directory a streaming query records its progress in:
metadata (the query id), offsets/ (planned batches, v1 or v2), commits/, sources/,
state/. inspect and verify only read it (safe beside a running query); repartition
writes a control batch into a stopped query's checkpoint. The file formats are
specified in package checkpoint (checkpoint/doc.go).`,
}

func init() {
	checkpointCmd.AddCommand(checkpointInspectCmd())
	rootCmd.AddCommand(checkpointCmd)
	rootCmd.AddCommand(progressFlattenCmd())
	rootCmd.AddCommand(planCmd())
}

// planCmd prints what `ethstream run` with the same flags would do on start.
// It takes run's flag set and builds the query as run does, so the two
// validate through one path and refuse with the same code.
func planCmd() *cobra.Command {
	var (
		f      queryFlags
		asJSON bool
		probe  bool
	)
	cmd := &cobra.Command{
		Use:   "plan --checkpoint DIR --source NAME=FORMAT:URI ... [--conf K=V ...] [--table DIR] [--json] [--probe=false] [any run flag]",
		Short: "Print what a start of the query would do; writes nothing",
		Long: `plan reads the checkpoint (without locking or writing it) and prints what
'ethstream run' with the same flags would do on start: the uncommitted batch it would
re-run first, the sources it would resume, add and tombstone, a repartition from -> to,
warnings (pinned confs overriding the session), and the error it would refuse with,
if any; in that case plan exits non-zero with the same code. Then the steps: the batches
the start performs before it polls its sources, each step by step as the run's driver
would perform it (plan is the run's dry run), and the poll that decides the next batch.
It takes every flag of run, so a run command line becomes a plan by changing its first
word.`,
		Example: `  # What would a restart that adds the live source do? (no lock, no write)
  ethstream plan --checkpoint work/checkpoint --source "s3_backfill=s3archive:file://$PWD/work/archive/v1.0/eth/blocks" \
    --source "eth_live=ethrpc:http://127.0.0.1:8545?start_block=$((LAST_BLOCK + 1))" \
    --conf spark.sql.streaming.queryEvolution.enableSourceEvolution=true
  ethstream plan --checkpoint 's3://lake/q/checkpoint?endpoint=http://127.0.0.1:9000' --source '=s3archive:file:///data/blocks' --json --probe=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, q, opts, err := f.build(newLogger(cmd), false)
			if err != nil {
				return err
			}
			// Run refuses this before its checkpoint is touched: so does plan.
			if err := pipeline.CheckProgressFile(cfg.ProgressFile); err != nil {
				return err
			}
			if cfg.Table == "" || !probe {
				q.Sink = nil // not probed
			}
			if !probe {
				for i := range q.Sources {
					q.Sources[i].Source = nil
				}
			}
			// A checkpoint in an older state format keeps it, as run does.
			if err := pipeline.AdoptStateFormat(cfg, &q, opts); err != nil {
				return err
			}
			rep, planErr := engine.Plan(cmd.Context(), q, opts.FS, opts.CheckpointDir)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else if err := printPlan(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			return planErr
		},
	}
	f.register(cmd, false)
	var uf uiFlags // run's flags, accepted: plan serves no dashboard
	uf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	cmd.Flags().BoolVar(&probe, "probe", true, "check, reading only, that the sources answer and hold data and that --table (if given) is usable, as run does before its first write")
	return cmd
}

// planWidth is the width plan's prose keeps to (a terminal's 100 columns).
// Lines that name the checkpoint or a source are not folded: their length
// is the path's, and a path stays whole so it can be copied.
const planWidth = 100

func printPlan(w io.Writer, r *engine.PlanReport) error {
	var b strings.Builder
	if r.NewCheckpoint {
		fmt.Fprintf(&b, "new checkpoint %s: offset log v%d, %d state partitions\n", r.Checkpoint, r.FormatVersion, r.StatePartitions)
	} else {
		fmt.Fprintf(&b, "checkpoint %s: query %s, offset log v%d, %d state partitions\n", r.Checkpoint, r.QueryID, r.FormatVersion, r.StatePartitions)
	}
	if r.PendingBatch != nil {
		fmt.Fprintf(&b, "re-run uncommitted batch %d (%s) first, with its recorded offsets\n", *r.PendingBatch, r.PendingKind)
	}
	if r.Repartition != nil {
		fmt.Fprintf(&b, "repartition state %d -> %d in control batch %d\n", r.Repartition.From, r.Repartition.To, r.Repartition.BatchID)
	}
	if len(r.Resumed) > 0 {
		fmt.Fprintf(&b, "resume sources: %s\n", strings.Join(r.Resumed, ", "))
	}
	if len(r.Added) > 0 {
		fmt.Fprintf(&b, "add sources (from their configured start): %s\n", strings.Join(r.Added, ", "))
	}
	for _, t := range r.Tombstoned {
		fmt.Fprintf(&b, "tombstone %s in batch %d (last offset %s)\n", t.Name, t.RemovedInBatch, offsetStr(t.LastOffset))
	}
	printShapeChanges(&b, r)
	printOperators(&b, r)
	printJoinFilters(&b, r)
	for _, w := range r.Warnings {
		b.WriteString(textwrap.Words("warning: "+w, "  ", planWidth))
	}
	if r.ErrorCode == "" {
		fmt.Fprintf(&b, "next batch id: %d\n", r.NextBatchID)
		if len(r.Steps) > 0 {
			b.WriteString("steps:\n")
			for _, s := range r.Steps {
				b.WriteString(textwrap.Words("  "+s, "    ", planWidth))
			}
		}
	} else {
		fmt.Fprintf(&b, "the start would be refused: %s\n", r.ErrorCode)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func checkpointInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect DIR [--json]",
		Short: "Show a checkpoint's query id, batches, sources, tombstones and control batches",
		Long: `inspect reads a checkpoint without locking or writing it (safe while the query runs).

--json prints {"queryId","formatVersion","latestBatchId","latestCommittedBatchId",
"sources":[{"name","offset"}],"tombstones":[{"name","removedInBatch","lastOffset"}],
"statePartitions","conf":{...},"controlBatches":[{"batchId","operationType","from","to"}]}.
Conf keys the checkpoint does not record are shown with the value they mean (Spark's
default for old checkpoints). A checkpoint Apache Spark wrote reads too; one whose state
another provider wrote (Spark's HDFS-backed or RocksDB store) is shown but cannot be
resumed (STATE_PROVIDER_UNSUPPORTED). A damaged file fails with CHECKPOINT_CORRUPT naming
it; a directory that is not a checkpoint (empty, a Delta table) or a regular file fails
with INVALID_ARGUMENT.`,
		Example: `  ethstream checkpoint inspect work/checkpoint
  ethstream checkpoint inspect 's3://lake/q/checkpoint?endpoint=http://127.0.0.1:9000&anonymous=true' --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs, dir, err := store(cmd.Context(), "checkpoint", args[0])
			if err != nil {
				return err
			}
			rep, err := engine.Inspect(fs, dir)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return printInspect(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func printInspect(w io.Writer, r *engine.InspectReport) error {
	id := func(p *int64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprint(*p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "query id:          %s\n", r.QueryID)
	fmt.Fprintf(&b, "offset log:        v%d\n", r.FormatVersion)
	fmt.Fprintf(&b, "latest batch:      %s (committed: %s)\n", id(r.LatestBatchID), id(r.LatestCommittedBatchID))
	fmt.Fprintf(&b, "state partitions:  %d\n", r.StatePartitions)
	b.WriteString("sources:\n")
	for _, s := range r.Sources {
		fmt.Fprintf(&b, "  %-20s %s\n", s.Name, offsetStr(s.Offset))
	}
	if len(r.Tombstones) > 0 {
		b.WriteString("tombstones:\n")
		for _, t := range r.Tombstones {
			fmt.Fprintf(&b, "  %-20s removed in batch %d, last offset %s\n", t.Name, t.RemovedInBatch, offsetStr(t.LastOffset))
		}
	}
	for _, c := range r.ControlBatches {
		fmt.Fprintf(&b, "control batch %d: %s %d -> %d\n", c.BatchID, c.OperationType, c.From, c.To)
	}
	b.WriteString("conf:\n")
	for _, k := range sortedConfKeys(r.Conf) {
		fmt.Fprintf(&b, "  %s=%s\n", k, r.Conf[k])
	}
	if r.LatestBatchID != nil {
		// What a key the checkpoint does not record means (a Spark or older checkpoint).
		for _, k := range checkpoint.PinnedConfs {
			if v, recorded := checkpoint.ConfValue(r.Conf, k); !recorded {
				fmt.Fprintf(&b, "  %s=%s (not recorded: default)\n", k, v)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func offsetStr(o json.RawMessage) string {
	if o == nil {
		return "-"
	}
	return string(o)
}

func sortedConfKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}

func progressFlattenCmd() *cobra.Command {
	var (
		out    string
		phases []string
	)
	cmd := &cobra.Command{
		Use:   "progress --out DIR --phase NAME=PROGRESS_FILE ...",
		Short: "Flatten progress logs (a checkpoint's, or a run's --progress file) into batches.csv and sources.csv",
		Long: `progress reads StreamingQueryProgress logs (one JSON event per line: a run's --progress
file, or a checkpoint directory, whose progress log is <checkpoint>/progress/, the recent
history only) and writes DIR/batches.csv and
DIR/sources.csv with the columns of docs/contracts.md, Progress records. Each --phase names the phase of the
events in one file; files are read in the order given.`,
		Example: `  ethstream progress --out results --phase backfill=work/progress/backfill.jsonl --phase add_live=work/progress/add_live.jsonl
  ethstream progress --out results --phase all=work/checkpoint   # the checkpoint's own progress log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" || len(phases) == 0 {
				return usage(errcode.New(errcode.InvalidArgument, "", "pass --out DIR and at least one --phase NAME=FILE", "missing --out or --phase"))
			}
			var pf []engine.PhaseFile
			var locs []location
			for _, p := range phases {
				name, file, ok := strings.Cut(p, "=")
				if !ok || name == "" || file == "" {
					return usage(errcode.New(errcode.InvalidArgument, "", "use --phase NAME=PROGRESS_FILE", "bad --phase %q", p))
				}
				pf = append(pf, engine.PhaseFile{Phase: name})
				locs = append(locs, location{"--phase " + name, file})
			}
			// A phase file is a run's --progress file or a checkpoint
			// directory, local or on S3 like any checkpoint.
			fs, paths, err := stores(cmd.Context(), locs...)
			if err != nil {
				return err
			}
			for i := range pf {
				pf[i].Path = paths[i]
			}
			return engine.FlattenProgress(fs, out, pf)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output directory")
	cmd.Flags().StringArrayVar(&phases, "phase", nil, "NAME=PROGRESS_FILE (repeatable)")
	return cmd
}
