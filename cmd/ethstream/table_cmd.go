package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/spf13/cobra"
)

func init() {
	rootCmd.AddCommand(tableCmd())
}

func tableCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "table",
		Short: "Inspect and maintain a Delta table (show, history, optimize, vacuum)",
		Long: `table reads and maintains Delta Lake tables: the one 'ethstream run' writes, and any
table written by Spark or delta-rs with protocol reader 1 / writer 2.`,
	}
	cmd.AddCommand(tableShowCmd(), tableHistoryCmd(), tableOptimizeCmd(), tableVacuumCmd())
	return cmd
}

func tableShowCmd() *cobra.Command {
	var (
		format  string
		version int64
	)
	cmd := &cobra.Command{
		Use:   "show DIR [--format csv|jsonl] [--version V]",
		Short: "Print every live row of a Delta table",
		Long: `show prints every live row of the table at its latest version (or --version V).
csv: a header row, then one row per table row; nested values are JSON text.
jsonl: one JSON object per row. A table the sink wrote prints its window struct as
window_start, window_end, then its other columns (the reference query's: source, miner,
count); timestamps are RFC 3339 UTC.`,
		Example: `  ethstream table show work/table > table.csv
  ethstream table show 's3://lake/q/table?endpoint=http://127.0.0.1:9000&anonymous=true' --format jsonl --version 3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := delta.CheckShowOptions(format, version); err != nil {
				return usage(err)
			}
			fs, dir, err := store(cmd.Context(), "table", args[0])
			if err != nil {
				return err
			}
			return delta.ShowFS(cmd.Context(), cmd.OutOrStdout(), fs, dir, format, version)
		},
	}
	cmd.Flags().StringVar(&format, "format", delta.FormatCSV, "output format: csv or jsonl")
	cmd.Flags().Int64Var(&version, "version", -1, "table version to read (time travel); -1 = latest")
	return cmd
}

func tableHistoryCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history DIR [--json]",
		Short: "Print the commitInfo of every commit, newest first",
		Long: `history prints one line per commit of the table's log, newest first: its version, time,
operation (STREAMING UPDATE for a batch's MERGE, OPTIMIZE for a compaction, ...), the version
it read, the engine that wrote it (ethstream/<version>, the version --version prints) and
its operationMetrics (rows inserted, updated and deleted, files added and removed). --json
prints each commit's whole commitInfo as one JSON object a line. It writes nothing.`,
		Example: `  ethstream table history work/table
  ethstream table history work/table --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs, dir, err := store(cmd.Context(), "table", args[0])
			if err != nil {
				return err
			}
			t, err := delta.OpenFS(cmd.Context(), fs, dir)
			if err != nil {
				return err
			}
			hist, err := t.History(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				for _, ci := range hist {
					if err := enc.Encode(struct {
						Version int64 `json:"version"`
						delta.CommitInfo
					}{ci.Version, ci}); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tTIMESTAMP\tOPERATION\tREAD_VERSION\tENGINE\tMETRICS")
			for _, ci := range hist {
				rv := ""
				if ci.ReadVersion != nil {
					rv = fmt.Sprint(*ci.ReadVersion)
				}
				metrics, _ := json.Marshal(ci.OperationMetrics)
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", ci.Version,
					time.UnixMilli(ci.Timestamp).UTC().Format(time.RFC3339Nano), ci.Operation, rv, ci.EngineInfo, metrics)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per commit")
	return cmd
}

func tableOptimizeCmd() *cobra.Command {
	var targetRows int
	cmd := &cobra.Command{
		Use:   "optimize DIR [--target-file-rows N]",
		Short: "Compact the small files of a table the sink wrote, any query's (dataChange=false)",
		Long: `optimize rewrites the table's small data files into files of up to --target-file-rows
rows, as one OPTIMIZE commit with dataChange=false: readers see the same rows at the new
version, and streaming readers skip the commit. The replaced files stay until 'table vacuum'
deletes them after the retention. The sink already compacts by itself after its commits
(delta.autoOptimize.autoCompact); this is the same operation on demand.`,
		Example: `  ethstream table optimize work/table
  ethstream table optimize work/table --target-file-rows 500000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs, dir, err := store(cmd.Context(), "table", args[0])
			if err != nil {
				return err
			}
			t, err := delta.OpenFS(cmd.Context(), fs, dir)
			if err != nil {
				return err
			}
			res, err := t.Optimize(cmd.Context(), delta.OptimizeOptions{TargetFileRows: targetRows})
			if err != nil {
				return err
			}
			if res.FilesRemoved == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "nothing to compact at version %d\n", res.Version)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "version %d: compacted %d files into %d (%d rows)\n",
				res.Version, res.FilesRemoved, res.FilesAdded, res.Rows)
			return nil
		},
	}
	cmd.Flags().IntVar(&targetRows, "target-file-rows", delta.DefaultTargetFileRows, "rows per compacted file")
	return cmd
}

func tableVacuumCmd() *cobra.Command {
	var (
		retention time.Duration
		dryRun    bool
	)
	cmd := &cobra.Command{
		Use:   "vacuum DIR [--retention 168h] [--dry-run=true]",
		Short: "Delete data files the table no longer references (dry run by default)",
		Long: `vacuum lists (or, with --dry-run=false, deletes) data files that the latest snapshot
does not reference and that are older than --retention: files removed longer ago than the
retention and orphans of abandoned writes. Live files and files removed within the
retention are never touched, so time travel within the retention keeps working.`,
		Example: `  ethstream table vacuum work/table                            # list what would go
  ethstream table vacuum work/table --retention 24h --dry-run=false`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if retention < 0 {
				return errcode.New(errcode.InvalidArgument, "", "pass --retention 0 or more", "negative --retention %s", retention)
			}
			fs, dir, err := store(cmd.Context(), "table", args[0])
			if err != nil {
				return err
			}
			t, err := delta.OpenFS(cmd.Context(), fs, dir)
			if err != nil {
				return err
			}
			files, err := t.Vacuum(cmd.Context(), retention, dryRun)
			if err != nil {
				return err
			}
			verb := "deleted"
			if dryRun {
				verb = "would delete"
			}
			for _, f := range files {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", verb, f)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %d files\n", verb, len(files))
			return nil
		},
	}
	cmd.Flags().DurationVar(&retention, "retention", 168*time.Hour, "keep files removed more recently than this")
	cmd.Flags().BoolVar(&dryRun, "dry-run", true, "only list the files")
	return cmd
}
