package main

import (
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/spf13/cobra"
)

func checkpointVerifyCmd() *cobra.Command {
	var table string
	cmd := &cobra.Command{
		Use:   "verify DIR [--table TABLE]",
		Short: "Read every file of a checkpoint (and its Delta table) in full and report damage",
		Long: `verify reads, without locking or writing anything, every file of the checkpoint DIR:
metadata, every offsets and commits entry, the sources' logs (a file source's log, the live
source's history), the shape/ records, every line of the progress log and every retained
state version (each data file's header, chunks, records and footer against its metadata).
With --table it also reads every commit and checkpoint of the table's _delta_log and every
live data file in full. It then cross-checks what two files both record: gaps in the
offsets or commit log, a commit without its offsets entry, a commit whose watermark is not
the next batch's, a file source log behind the offsets, state versions the commit log does
not cover, and the table's txn for the query id against the commit log (including that the
table records the checkpoint's last committed batch). It prints one line per file or check
("ok" or "DAMAGED" with its path and the reason) and exits 1 with CHECKPOINT_CORRUPT when
anything is damaged. A start checks less (what the next batch depends on), so verify is
the way to check a backup or a copy.`,
		Example: `  ethstream checkpoint verify work/checkpoint --table work/table
  ethstream checkpoint verify 's3://lake/q/checkpoint?endpoint=http://127.0.0.1:9000&anonymous=true' `,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			locs := []location{{"checkpoint", args[0]}}
			if table != "" {
				locs = append(locs, location{"--table", table})
			}
			fs, paths, err := stores(cmd.Context(), locs...)
			if err != nil {
				return err
			}
			tablePath := ""
			if table != "" {
				tablePath = paths[1]
			}
			rep, err := pipeline.Verify(cmd.Context(), fs, paths[0], tablePath)
			if err != nil {
				return err
			}
			rep.Print(cmd.OutOrStdout())
			if rep.Damaged > 0 {
				return errcode.New(errcode.CheckpointCorrupt, args[0],
					"restore the damaged files from a backup (each is named above); ethstream never repairs a checkpoint silently",
					"%d of %d files are damaged", rep.Damaged, len(rep.Checks))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&table, "table", "", "also verify this Delta table and that it agrees with the checkpoint")
	return cmd
}

func init() {
	checkpointCmd.AddCommand(checkpointVerifyCmd())
}
