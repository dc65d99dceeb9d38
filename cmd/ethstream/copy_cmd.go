package main

import (
	"fmt"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/relocate"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/spf13/cobra"
)

// checkpointCopyCmd copies a stopped query's checkpoint (and table) to
// another location, any mix of local and s3:// (package relocate).
func checkpointCopyCmd() *cobra.Command {
	var tableFrom, tableTo string
	cmd := &cobra.Command{
		Use:   "copy SRC DST [--table TABLE --table-to TABLE_DST]",
		Short: "Copy a stopped query's checkpoint (and its Delta table) to another location, local or s3://",
		Long: `copy copies the checkpoint SRC to DST and, with --table and --table-to, the query's
Delta table, between any two locations (local paths, file://, s3://). The copy resumes as
the same query with continuous batch ids: run it with --checkpoint DST --table TABLE_DST
(the table is recognised by its Delta metadata id, not its path).

It takes the source's lock (CHECKPOINT_LOCKED while the query runs), writes nothing else
of the source, refuses a destination that holds files (COPY_DESTINATION_NOT_EMPTY), and
reads every file it wrote back (size and SHA-256; COPY_VERIFY_FAILED). Until it finishes,
DST holds the marker copy-in-progress and every command refuses it
(CHECKPOINT_COPY_INCOMPLETE): a copy that crashed or failed is completed by running it
again, which clears the unfinished destination first. The state's local cache is not
copied: the first run on DST rebuilds it from the copied state files.`,
		Example: `  ethstream checkpoint copy work/checkpoint 's3://lake/q/checkpoint?endpoint=http://127.0.0.1:9000' \
    --table work/table --table-to 's3://lake/q/table?endpoint=http://127.0.0.1:9000'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (tableFrom == "") != (tableTo == "") {
				return errcode.New(errcode.MissingFlag, "", "pass --table TABLE and --table-to TABLE_DST together, or neither", "--table and --table-to go together")
			}
			locs := []location{{"checkpoint", args[0]}, {"checkpoint", args[1]}}
			if tableFrom != "" {
				locs = append(locs, location{"--table", tableFrom}, location{"--table-to", tableTo})
			}
			fs, paths, err := stores(cmd.Context(), locs...)
			if err != nil {
				return err
			}
			o := relocate.Options{FS: fs, From: paths[0], To: paths[1], Logger: newLogger(cmd)}
			if tableFrom != "" {
				o.TableFrom, o.TableTo = paths[2], paths[3]
			}
			res, err := relocate.Copy(cmd.Context(), o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "copied %s -> %s: %d checkpoint files", args[0], args[1], res.CheckpointFiles)
			if tableFrom != "" {
				fmt.Fprintf(out, ", %d table files (%s -> %s)", res.TableFiles, tableFrom, tableTo)
			}
			fmt.Fprintf(out, ", %d bytes, every file read back and verified\n", res.Bytes)
			if tableFrom == "" {
				return nil
			}
			// The copied pair must pass the start's check of the table.
			sink, err := delta.NewMergeSink(delta.SinkOptions{Path: o.TableTo, FS: fs, Logger: newLogger(cmd)})
			if err != nil {
				return err
			}
			if err := engine.CheckSink(cmd.Context(), fs, o.To, sink); err != nil {
				return fmt.Errorf("check the copied pair: %w", err)
			}
			fmt.Fprintf(out, "the copied table is the checkpoint's: resume with --checkpoint %s --table %s\n", args[1], tableTo)
			return nil
		},
	}
	cmd.Flags().StringVar(&tableFrom, "table", "", "also copy the query's Delta table from this location")
	cmd.Flags().StringVar(&tableTo, "table-to", "", "where to copy the table (with --table)")
	return cmd
}

func init() {
	checkpointCmd.AddCommand(checkpointCopyCmd())
}
