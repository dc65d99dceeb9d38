package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/errcode"
	"github.com/spf13/cobra"
)

func init() {
	cmd := &cobra.Command{
		Use:   "archive",
		Short: "Read a generated archive's manifest (info), or extend it with the node's next blocks (extend)",
	}
	cmd.AddCommand(archiveInfoCmd(), archiveExtendCmd())
	rootCmd.AddCommand(cmd)
}

// archiveFields are the manifest fields archive info prints, by their JSON
// names, with the shell variable --env sets for each.
var archiveFields = map[string]struct {
	env string
	get func(*archivegen.Manifest) string
}{
	"preset":          {"ARCHIVE_PRESET", func(m *archivegen.Manifest) string { return m.Preset }},
	"seed":            {"ARCHIVE_SEED", func(m *archivegen.Manifest) string { return fmt.Sprint(m.Seed) }},
	"firstDay":        {"FIRST_DAY", func(m *archivegen.Manifest) string { return m.FirstDay }},
	"days":            {"ARCHIVE_DAYS", func(m *archivegen.Manifest) string { return fmt.Sprint(m.Days) }},
	"firstBlock":      {"FIRST_BLOCK", func(m *archivegen.Manifest) string { return fmt.Sprint(m.FirstBlock) }},
	"lastBlock":       {"LAST_BLOCK", func(m *archivegen.Manifest) string { return fmt.Sprint(m.LastBlock) }},
	"firstParentHash": {"FIRST_PARENT_HASH", func(m *archivegen.Manifest) string { return m.FirstParentHash }},
	"lastHash":        {"LAST_HASH", func(m *archivegen.Manifest) string { return m.LastHash }},
	"lastTimestamp":   {"LAST_TIMESTAMP", func(m *archivegen.Manifest) string { return fmt.Sprint(m.LastTimestamp) }},
	"rows":            {"ARCHIVE_ROWS", func(m *archivegen.Manifest) string { return fmt.Sprint(m.Rows) }},
	"bytes":           {"ARCHIVE_BYTES", func(m *archivegen.Manifest) string { return fmt.Sprint(m.Bytes) }},
	"files":           {"ARCHIVE_FILES", func(m *archivegen.Manifest) string { return fmt.Sprint(len(m.Files)) }},
}

func archiveFieldNames() []string {
	names := make([]string, 0, len(archiveFields))
	for n := range archiveFields {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func archiveInfoCmd() *cobra.Command {
	var (
		field string
		env   bool
	)
	cmd := &cobra.Command{
		Use:   "info DIR [--field NAME | --env]",
		Short: "Print an archive's block range and last hash from its manifest.json (no jq needed)",
		Long: `info reads DIR/manifest.json (the --out of gen-archive) and prints one field per line,
"name: value". --field NAME prints that field's value alone; --env prints shell assignments
(LAST_BLOCK=..., LAST_HASH=..., ...) for eval, which is how the README sets the live
source's start_block and start_parent_hash. Fields: ` + strings.Join(archiveFieldNames(), ", ") + ` (files: the
number of files).`,
		Example: `  ethstream archive info work/scripts/s3/aws-public-blockchain
  ethstream archive info work/scripts/s3/aws-public-blockchain --field lastHash
  eval "$(ethstream archive info work/scripts/s3/aws-public-blockchain --env)"   # sets LAST_BLOCK, LAST_HASH, ...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if field != "" && env {
				return usage(errcode.New(errcode.InvalidArgument, "", "pass either --field NAME or --env", "both --field and --env given"))
			}
			f, ok := archiveFields[field]
			if field != "" && !ok {
				return usage(errcode.New(errcode.InvalidArgument, "", "pass --field one of: "+strings.Join(archiveFieldNames(), ", "),
					"unknown manifest field %q", field))
			}
			m, err := archivegen.ReadManifest(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if field != "" {
				_, err := fmt.Fprintln(out, f.get(m))
				return err
			}
			var b strings.Builder
			for _, n := range archiveFieldNames() {
				if env {
					fmt.Fprintf(&b, "%s=%s\n", archiveFields[n].env, archiveFields[n].get(m))
				} else {
					fmt.Fprintf(&b, "%-16s %s\n", n+":", archiveFields[n].get(m))
				}
			}
			_, err = fmt.Fprint(out, b.String())
			return err
		},
	}
	cmd.Flags().StringVar(&field, "field", "", "print only this field's value")
	cmd.Flags().BoolVar(&env, "env", false, "print NAME=VALUE shell assignments, for eval")
	return cmd
}

func archiveExtendCmd() *cobra.Command {
	var blocks int
	cmd := &cobra.Command{
		Use:   "extend DIR --blocks N",
		Short: "Append the next N blocks of the node's chain to an archive, as the dataset's producer publishes them",
		Long: `extend appends to the archive DIR (the --out of gen-archive) the next N blocks that
ethstream node, started on it, would mine, written as the dataset's producer writes a node's
blocks (one file per date, and per table when the archive has tables), then rewrites
DIR/manifest.json: its last block and hash become the new last block's. The new files are
staged in DIR/_extend and committed by a journal, so an interrupted extension leaves the
archive as it was or one that the same command, run again, completes. A node started on the
archive before the extension serves those blocks, with the same hashes, as its first ones: a
live source on that node can start before the extended archive's last block (overlap=N).
Extend a copy: a node does not start on an extended archive.`,
		Example: `  # a copy of the archive (cp -r work/scripts/s3/aws-public-blockchain work/scripts/s3/seam-archive),
  # extended by the node's next 10 blocks
  ethstream archive extend work/scripts/s3/seam-archive --blocks 10`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			ext, err := ethnode.Extend(cmd.Context(), vfs.Default, args[0], blocks)
			if err != nil {
				return err
			}
			verb := "extended"
			if ext.Resumed {
				verb = "completed the interrupted extension of"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s with blocks %d..%d in %s\nlast block %d hash %s\n",
				verb, args[0], ext.FirstBlock, ext.Manifest.LastBlock, time.Since(start).Round(time.Millisecond), ext.Manifest.LastBlock, ext.Manifest.LastHash)
			return err
		},
	}
	cmd.Flags().IntVar(&blocks, "blocks", 0, "blocks to append (N >= 1)")
	return cmd
}
