package main

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/spf13/cobra"
)

func checkpointRepartitionCmd() *cobra.Command {
	var partitions int
	var localDir string
	c := &cobra.Command{
		Use:   "repartition DIR --partitions N",
		Short: "Repartition a stopped query's state to N partitions (the offline REPARTITION control batch)",
		Long: `repartition writes the control batch R a restart with
spark.sql.streaming.stateStore.partitions=N would run: offsets/R copies the last committed
offsets with controlBatchInfo REPARTITION {from, to}, the state is redistributed into a new
version, and commits/R is written last. The query must be stopped (the checkpoint lock is
taken). A crash is redone by running the same command again; a different N is refused until
the unfinished one completes. The state is the reference query's (docs/contracts.md, Reference query).
A checkpoint without a committed batch, or whose state another provider wrote
(STATE_PROVIDER_UNSUPPORTED), is refused before the lock is taken: nothing is created.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			op, err := agg.New(pipeline.ReferenceSpec())
			if err != nil {
				return err
			}
			if localDir == "" {
				localDir = pipeline.DefaultLocalDir(args[0])
			}
			res, err := engine.RepartitionOffline(cmd.Context(), engine.Options{
				CheckpointDir: args[0], FS: vfs.Default, LocalDir: localDir, Logger: newLogger(cmd),
			}, op, partitions)
			if err != nil {
				return err
			}
			redo := ""
			if res.Redo {
				redo = " (redone after an unfinished attempt)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "control batch %d: state partitions %d -> %d, %d keys before, %d after, %d ms%s\n",
				res.BatchID, res.From, res.To, res.Stats.KeysBefore, res.Stats.KeysAfter, res.DurationMs, redo)
			return nil
		},
	}
	c.Flags().IntVar(&partitions, "partitions", 0, "the new state partition count (1 to 10,000)")
	c.Flags().StringVar(&localDir, "local-dir", "", "state cache directory (default: the run command's)")
	_ = c.MarkFlagRequired("partitions")
	return c
}

func init() { checkpointCmd.AddCommand(checkpointRepartitionCmd()) }
