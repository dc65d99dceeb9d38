package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/spf13/cobra"
)

// checkpointCmd is the `checkpoint` parent command; other files add
// subcommands to it (e.g. `checkpoint repartition`) in their init.
var checkpointCmd = &cobra.Command{
	Use:   "checkpoint",
	Short: "Inspect a streaming query's checkpoint directory",
	Long: `checkpoint reads the directory a streaming query records its progress in:
metadata (the query id), offsets/ (planned batches, v1 or v2), commits/, sources/,
state/. The file formats are specified in package checkpoint (checkpoint/doc.go).`,
}

func init() {
	checkpointCmd.AddCommand(checkpointInspectCmd())
	rootCmd.AddCommand(checkpointCmd)
	rootCmd.AddCommand(progressFlattenCmd())
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
A damaged file fails with CHECKPOINT_CORRUPT naming it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := engine.Inspect(vfs.Default, args[0])
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
		Short: "Flatten progress logs (progress.jsonl) into batches.csv and sources.csv",
		Long: `progress reads StreamingQueryProgress logs (one JSON event per line, as in
<checkpoint>/progress.jsonl or a run's --progress file) and writes DIR/batches.csv and
DIR/sources.csv with the columns of DESIGN.md §8. Each --phase names the phase of the
events in one file; files are read in the order given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" || len(phases) == 0 {
				return errcode.New(errcode.InvalidArgument, "", "pass --out DIR and at least one --phase NAME=FILE", "missing --out or --phase")
			}
			var pf []engine.PhaseFile
			for _, p := range phases {
				name, file, ok := strings.Cut(p, "=")
				if !ok || name == "" || file == "" {
					return errcode.New(errcode.InvalidArgument, "", "use --phase NAME=PROGRESS_FILE", "bad --phase %q", p)
				}
				pf = append(pf, engine.PhaseFile{Phase: name, Path: file})
			}
			return engine.FlattenProgress(vfs.Default, out, pf)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output directory")
	cmd.Flags().StringArrayVar(&phases, "phase", nil, "NAME=PROGRESS_FILE (repeatable)")
	return cmd
}
