package main

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/state"
	"github.com/spf13/cobra"
)

func init() {
	rootCmd.AddCommand(stateCmd())
}

func stateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Read a checkpoint's operator state (dump)",
		Long: `state reads the versioned state a stateful operator keeps in <checkpoint>/state/<opId>,
from the checkpoint files alone (no local cache needed).`,
	}
	cmd.AddCommand(stateDumpCmd())
	return cmd
}

func stateDumpCmd() *cobra.Command {
	var (
		ckpt      string
		format    string
		batch     int64
		op        int
		storeName string
	)
	cmd := &cobra.Command{
		Use:   "dump DIR [--format csv|jsonl|statestore [--store NAME]] [--batch N] [--op ID]",
		Short: "Print every key in state with its partition",
		Long: `dump prints the state of operator --op (default 0) as of the latest committed batch
(the highest <checkpoint>/commits/<id>), or as of batch --batch N: the newest state
version at or before it.

csv: a header row, then one row per key in (partition, key) order. The columns are the
state's key and value columns (from the state schema the checkpoint recorded, whatever the
query) in the order of the query's output where they are output columns (that of 'ethstream
table show': window_start, window_end, source, miner, count for the reference query), then
partition; timestamps are RFC 3339 UTC as there (2026-09-28T01:30:00Z, a fraction only when
there is one). jsonl: one JSON object per key with the same columns.

statestore: the rows Spark's state data source reads (format("statestore")), one JSON
object per line with its columns key (the key fields), value (the value fields) and
partition_id, for every operator kind; --store NAME is its storeName option (default: the
operator's one store, "default").

The checkpoint is the argument, as for 'checkpoint inspect DIR'; --checkpoint DIR, the
older spelling, still works.`,
		Example: `  ethstream state dump work/checkpoint > state.csv
  ethstream state dump work/checkpoint --batch 12 --format jsonl
  ethstream state dump work/checkpoint --op 1 --format statestore`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && ckpt != "" && args[0] != ckpt {
				return usage(errcode.New(errcode.InvalidArgument, "", "pass the checkpoint once: state dump DIR",
					"two checkpoints: %q and --checkpoint %q", args[0], ckpt))
			}
			if len(args) == 1 {
				ckpt = args[0]
			}
			if ckpt == "" {
				return errcode.New(errcode.MissingFlag, "", "pass the checkpoint: state dump DIR", "missing the checkpoint")
			}
			fs, dir, err := store(cmd.Context(), "--checkpoint", ckpt)
			if err != nil {
				return err
			}
			o := state.DumpOptions{FS: fs, Checkpoint: dir, Operator: op, Batch: batch, Format: format, Store: storeName,
				Columns: recordedColumns(fs, dir)}
			if err := o.Validate(); err != nil {
				return usage(err)
			}
			_, err = state.Dump(cmd.Context(), o, cmd.OutOrStdout())
			return err
		},
	}
	cmd.Flags().StringVar(&ckpt, "checkpoint", "", "checkpoint directory (the older spelling of the argument)")
	cmd.Flags().StringVar(&format, "format", "csv", "output format: csv or jsonl")
	cmd.Flags().Int64Var(&batch, "batch", -1, "dump the state as of this batch id; -1 = latest committed batch")
	cmd.Flags().IntVar(&op, "op", 0, "stateful operator id (the directory under <checkpoint>/state)")
	cmd.Flags().StringVar(&storeName, "store", "", "with --format statestore: the operator's store (Spark's storeName; default: its one store)")
	return cmd
}

// recordedColumns is the column order of the query's output as the
// checkpoint's query shape records it (shape.Shape.OutputSchema, e.g.
// "window_start timestamp, window_end timestamp, miner string null, gas
// int64 null (key: ...)"), so that state dump and table show print rows
// alike; nil (the state schema's order) when none is recorded.
func recordedColumns(fs vfs.FS, dir string) []string {
	rec, err := shape.ReadLatest(fs, dir)
	if err != nil || rec == nil {
		return nil // a damaged record is verify's to report; the dump needs none
	}
	fields, _, _ := strings.Cut(rec.Shape.OutputSchema, " (key: ")
	var cols []string
	for _, f := range strings.Split(fields, ", ") {
		if name, _, ok := strings.Cut(f, " "); ok {
			cols = append(cols, name)
		}
	}
	return cols
}
