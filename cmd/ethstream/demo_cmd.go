package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/demo"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ui"
	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	var workdir, results, preset, readme, storage string
	var days int
	var seed int64
	var inProcess, refresh bool
	var uf uiFlags
	var scenario string
	c := &cobra.Command{
		Use:   "demo [--workdir DIR] [--results DIR] [--preset demo|seed] [--days N] [--storage local|s3] [--in-process] [--refresh-results | --readme FILE] [--ui-addr ADDR [--ui-wait]] [--scenario restart-rules]",
		Short: "Run the whole lifecycle offline: backfill, add live, retire the archive, refused reuse, shrink the state, proof",
		Long: `demo generates a synthetic mainnet archive (cached in the work directory), serves it
through an embedded S3 endpoint and an embedded JSON-RPC node on loopback, and runs each
phase as its own process of this binary (ethstream run with the flags printed for each
phase) on one checkpoint and one Delta table. It writes batches.csv, sources.csv,
verification.csv, summary.txt and the charts to the results directory (by default
<workdir>/results, so a run leaves the repository's committed results/ alone), prints
the summary, and exits 0 only if every check holds. --refresh-results writes them to
results/ instead and rewrites README.md's results sections from them: the reference
run, run from the repository's root.

The work directory keeps the archive between runs; the checkpoint, table and state cache
are recreated on every run. The phase scripts (scripts/) use their own work directory,
work/scripts, so the demo and the scripts never share a checkpoint.`,
		Example: `  ethstream demo                                   # the whole lifecycle, about a minute
  ethstream demo --days 3 --ui-addr 127.0.0.1:4040 --ui-wait
  ethstream demo --storage s3 --results /tmp/results`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if refresh {
				results, readme = "results", "README.md"
			}
			if results == "" {
				results = filepath.Join(workdir, "results")
			}
			p, err := presetFromFlags(preset, days)
			if err != nil {
				return err
			}
			o := demo.Options{WorkDir: workdir, ResultsDir: results, Preset: p, Seed: seed, Storage: storage,
				Out: cmd.OutOrStdout(), Logger: newLogger(cmd)}
			if scenario != "" {
				return runScenario(cmd, scenario, o)
			}
			if !inProcess {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find own executable: %w", err)
				}
				o.Runner = demo.Exec{Binary: exe, LogDir: filepath.Join(workdir, "logs")}
			}
			var srv *ui.Server
			var obs *demoDashboard
			if uf.addr != "" {
				dash, dobs := ui.NewDemo(demo.CheckpointDir(workdir), demoLayout)
				obs = &demoDashboard{dobs}
				if srv, err = uf.serve(dash, cmd.OutOrStdout()); err != nil {
					return err
				}
				// After the verdict: --ui-wait keeps the dashboard up.
				defer func() { err = errors.Join(err, uf.finish(cmd, srv)) }()
				o.Observer = obs
			}
			rep, err := demo.Run(cmd.Context(), o)
			if obs != nil {
				obs.finished(rep, err)
			}
			if err != nil {
				return err
			}
			if !rep.Passed() {
				return errcode.New("DEMO_VERIFICATION_FAILED", filepath.Join(results, "verification.csv"),
					"read the FAIL lines above; the checkpoint and table are kept in the work directory for inspection",
					"some verification checks failed")
			}
			if readme != "" {
				if err := demo.UpdateREADME(readme, results); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "all checks passed; results in %s\n", results)
			return nil
		},
	}
	c.Flags().StringVar(&workdir, "workdir", "work", "work directory: archive cache, checkpoint, table")
	c.Flags().StringVar(&results, "results", "", "where to write the CSVs and charts (default <workdir>/results)")
	c.Flags().StringVar(&preset, "preset", "demo", "archive preset: demo | seed")
	c.Flags().StringVar(&storage, "storage", "local", "where the checkpoint and the table live: local (the work directory) | s3 (the embedded S3 endpoint)")
	c.Flags().IntVar(&days, "days", 0, "reduced scale: the last N days instead of the preset")
	c.Flags().Int64Var(&seed, "seed", chain.DefaultSeed, "chain seed")
	c.Flags().StringVar(&readme, "readme", "", "after a passing run, rewrite the results sections of this README from the results")
	c.Flags().BoolVar(&refresh, "refresh-results", false, "write the reference run: the results to results/ and README.md's results sections from them (from the repository's root)")
	c.MarkFlagsMutuallyExclusive("refresh-results", "readme")
	c.MarkFlagsMutuallyExclusive("refresh-results", "results")
	c.Flags().BoolVar(&inProcess, "in-process", false, "run phases inside this process instead of restarting the binary for each")
	uf.register(c)
	c.Flags().StringVar(&scenario, "scenario", "", "run one scenario instead of the lifecycle: restart-rules (every restart-compatibility rule, on copies of a backfill checkpoint; writes restart-rules.csv)")
	return c
}

func init() { rootCmd.AddCommand(newDemoCmd()) }

// runScenario runs a named demo scenario.
func runScenario(cmd *cobra.Command, name string, o demo.Options) error {
	if name != "restart-rules" {
		return errcode.New(errcode.InvalidArgument, "", "use --scenario restart-rules", "unknown scenario %q", name)
	}
	rows, err := demo.RestartRules(cmd.Context(), o)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if !r.Pass() {
			return errcode.New("DEMO_VERIFICATION_FAILED", filepath.Join(o.ResultsDir, demo.RestartRulesFile),
				"read the FAIL lines above", "some restart rules did not behave as stated")
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "every restart rule behaved as stated; results in %s\n", filepath.Join(o.ResultsDir, demo.RestartRulesFile))
	return nil
}

// presetFromFlags is the archive a --preset/--days pair names: --days N > 0
// means the last N days instead of the preset.
func presetFromFlags(preset string, days int) (chain.Preset, error) {
	if days == 0 {
		return chain.PresetByName(preset)
	}
	if days < 0 || days > chain.TotalDays {
		return chain.Preset{}, errcode.New(errcode.InvalidArgument, "", fmt.Sprintf("pass --days between 1 and %d", chain.TotalDays),
			"invalid --days %d", days)
	}
	return chain.LastDaysPreset(days), nil
}
