package main

import (
	"fmt"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/storage"
	"github.com/spf13/cobra"
)

func checkpointRepartitionCmd() *cobra.Command {
	var partitions int
	var localDir string
	var dryRun bool
	c := &cobra.Command{
		Use:   "repartition DIR --partitions N [--dry-run] [--local-dir DIR]",
		Short: "Repartition a stopped query's state to N partitions (the offline REPARTITION control batch)",
		Long: `repartition writes the control batch R a restart with
spark.sql.streaming.stateStore.partitions=N would run: offsets/R copies the last committed
offsets with controlBatchInfo REPARTITION {from, to}, the state is redistributed into a new
version, and commits/R is written last. The query must be stopped (the checkpoint lock is
taken). A crash is redone by running the same command again; a different N is refused until
the unfinished one completes. If the state already has N partitions nothing is written and
the command says so (exit 0). --dry-run prints the steps without locking or writing anything.
The control batch is the one a run performs: the same plan and the same steps. No query
definition is needed: every stateful operator under DIR/state is repartitioned with the state
schema its last committed version recorded, whatever the query, and every stored row is kept.
A checkpoint without a committed
batch, or whose state another provider wrote (STATE_PROVIDER_UNSUPPORTED), is refused before
the lock is taken: nothing is created.`,
		Example: `  ethstream checkpoint repartition work/checkpoint --partitions 8 --dry-run   # the steps, nothing written
  ethstream checkpoint repartition work/checkpoint --partitions 8`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := engine.CheckPartitionCount(partitions); err != nil {
				return usage(err)
			}
			if err := storage.CheckLocal("--local-dir", localDir); err != nil {
				return err
			}
			fs, dir, err := store(cmd.Context(), "checkpoint", args[0])
			if err != nil {
				return err
			}
			if localDir == "" {
				localDir = pipeline.DefaultLocalDir(dir)
			}
			o := engine.Options{CheckpointDir: dir, FS: fs, LocalDir: localDir, Logger: newLogger(cmd)}
			var res *engine.RepartitionResult
			if dryRun {
				res, err = engine.PlanRepartitionOffline(o, state.Recorded{}, partitions)
			} else {
				res, err = engine.RepartitionOffline(cmd.Context(), o, state.Recorded{}, partitions)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case res.AlreadyAt:
				fmt.Fprintf(out, "state already at %d partitions (batch %d): nothing to do\n", res.To, res.BatchID)
			case dryRun:
				fmt.Fprint(out, res.Steps)
			default:
				redo := ""
				if res.Redo {
					redo = " (redone after an unfinished attempt)"
				}
				fmt.Fprintf(out, "control batch %d: state partitions %d -> %d, %d keys before, %d after, %d ms%s\n",
					res.BatchID, res.From, res.To, res.Stats.KeysBefore, res.Stats.KeysAfter, res.DurationMs, redo)
			}
			return nil
		},
	}
	c.Flags().IntVar(&partitions, "partitions", 0, "the new state partition count (1 to 10,000)")
	c.Flags().StringVar(&localDir, "local-dir", "", "state cache directory (default: the run command's)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the control batch's steps; lock, write and open nothing")
	_ = c.MarkFlagRequired("partitions")
	return c
}

func init() { checkpointCmd.AddCommand(checkpointRepartitionCmd()) }
