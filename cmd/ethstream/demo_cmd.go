package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/demo"
	"github.com/ethstream/ethstream/demo/orders"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ui"
	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	f := &demoFlags{}
	c := &cobra.Command{
		Use:   "demo [--workdir DIR] [--results DIR] [--preset demo|seed] [--days N] [--storage local|s3] [--in-process] [--refresh-results | --readme FILE] [--ui-addr ADDR [--ui-wait]] [--scenario restart-rules | --example orders [--duckdb BIN]]",
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
  ethstream demo --storage s3 --results /tmp/results
  ethstream demo --example orders --duckdb /tmp/duckref   # the seeds' orders examples (scripts/duckref)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	c.Flags().StringVar(&f.workdir, "workdir", "work", "work directory: archive cache, checkpoint, table")
	c.Flags().StringVar(&f.results, "results", "", "where to write the CSVs and charts (default <workdir>/results)")
	c.Flags().StringVar(&f.preset, "preset", "demo", "archive preset: demo | seed")
	c.Flags().StringVar(&f.storage, "storage", "local", "where the checkpoint and the table live: local (the work directory) | s3 (the embedded S3 endpoint)")
	c.Flags().IntVar(&f.days, "days", 0, "reduced scale: the last N days instead of the preset")
	c.Flags().Int64Var(&f.seed, "seed", chain.DefaultSeed, "chain seed")
	c.Flags().StringVar(&f.readme, "readme", "", "after a passing run, rewrite the results sections of this README from the results")
	c.Flags().BoolVar(&f.refresh, "refresh-results", false, "write the reference run: the results to results/ and README.md's results sections from them (from the repository's root)")
	c.MarkFlagsMutuallyExclusive("refresh-results", "readme")
	c.MarkFlagsMutuallyExclusive("refresh-results", "results")
	c.Flags().BoolVar(&f.inProcess, "in-process", false, "run phases inside this process instead of restarting the binary for each")
	f.uf.register(c)
	c.Flags().StringVar(&f.scenario, "scenario", "", "run one scenario instead of the lifecycle: restart-rules (every restart-compatibility rule, on copies of a backfill checkpoint; writes restart-rules.csv)")
	c.Flags().StringVar(&f.example, "example", "", "run another example instead of the lifecycle: orders (the seeds' orders: a union of named Delta sources, source evolution, the customer-activity query resized 4 -> 8 -> 4 state partitions; in <workdir>/orders, results in <results>, --refresh-results: results/orders)")
	c.Flags().StringVar(&f.duckdb, "duckdb", "", "with --example orders: a duckref binary (scripts/duckref) to check the table against DuckDB")
	c.MarkFlagsMutuallyExclusive("example", "scenario")
	return c
}

// demoFlags are demo's flags.
type demoFlags struct {
	workdir, results, preset, readme, storage, scenario string
	example, duckdb                                     string
	days                                                int
	seed                                                int64
	inProcess, refresh                                  bool
	uf                                                  uiFlags
}

// run runs the lifecycle (or a scenario) with the dashboard if asked, and
// turns a failed check into the command's error.
func (f *demoFlags) run(cmd *cobra.Command) (err error) {
	if f.example != "" {
		return f.runExample(cmd)
	}
	if f.refresh {
		f.results, f.readme = "results", "README.md"
	}
	if f.results == "" {
		f.results = filepath.Join(f.workdir, "results")
	}
	p, err := presetFromFlags(f.preset, f.days)
	if err != nil {
		return err
	}
	o := demo.Options{WorkDir: f.workdir, ResultsDir: f.results, Preset: p, Seed: f.seed, Storage: f.storage,
		Out: cmd.OutOrStdout(), Logger: newLogger(cmd)}
	if f.scenario != "" {
		return runScenario(cmd, f.scenario, o)
	}
	if !f.inProcess {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable: %w", err)
		}
		o.Runner = demo.Exec{Binary: exe, LogDir: filepath.Join(f.workdir, "logs")}
	}
	var srv *ui.Server
	var obs *demoDashboard
	if f.uf.addr != "" {
		dash, dobs := ui.NewDemo(demo.CheckpointDir(f.workdir), demoLayout)
		obs = &demoDashboard{dobs}
		if srv, err = f.uf.serve(dash, cmd.OutOrStdout()); err != nil {
			return err
		}
		// After the verdict: --ui-wait keeps the dashboard up.
		defer func() { err = errors.Join(err, f.uf.finish(cmd, srv)) }()
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
		return errcode.New("DEMO_VERIFICATION_FAILED", filepath.Join(f.results, "verification.csv"),
			"read the FAIL lines above; the checkpoint and table are kept in the work directory for inspection",
			"some verification checks failed")
	}
	if f.readme != "" {
		if err := demo.UpdateREADME(f.readme, f.results); err != nil {
			return err
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "all checks passed; results in %s\n", f.results)
	return nil
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

// runExample runs demo --example NAME: the orders example (package
// demo/orders), a check failing being the command's error.
func (f *demoFlags) runExample(cmd *cobra.Command) error {
	if f.example != "orders" {
		return errcode.New(errcode.InvalidArgument, "", "use --example orders", "unknown example %q", f.example)
	}
	results := f.results
	switch {
	case f.refresh:
		results = filepath.Join("results", "orders")
	case results == "":
		results = filepath.Join(f.workdir, "orders", "results")
	}
	seed := uint64(orders.DefaultSeed)
	if cmd.Flags().Changed("seed") {
		seed = uint64(f.seed)
	}
	rep, err := orders.Run(cmd.Context(), orders.Options{WorkDir: filepath.Join(f.workdir, "orders", "run"), ResultsDir: results,
		Seed: seed, DuckDB: f.duckdb, Out: cmd.OutOrStdout(), Logger: newLogger(cmd)})
	if err != nil {
		return err
	}
	if !rep.Passed() {
		return errcode.New("DEMO_VERIFICATION_FAILED", filepath.Join(results, orders.FileSummary),
			"read the FAIL lines above; the tables and checkpoints are kept in the work directory for inspection", "some checks of the orders example failed")
	}
	fmt.Fprintf(cmd.OutOrStdout(), "all checks passed; results in %s\n", results)
	return nil
}
