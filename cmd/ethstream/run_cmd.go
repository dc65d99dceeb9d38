package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/ui"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// queryFlags are shared by run and plan: they describe the query to start,
// and both commands take exactly this flag set.
type queryFlags struct {
	checkpoint, table, localDir string
	sink                        string
	sources, conf               []string
	trigger                     string
	maxBatches                  int
	progress                    string
	metricsAddr                 string
	tableShared                 bool
	sql                         sqlFlags
}

// register adds the flags to c; --table is required by run, optional for
// plan (needTable false).
func (f *queryFlags) register(c *cobra.Command, needTable bool) {
	c.Flags().StringVar(&f.checkpoint, "checkpoint", "", "checkpoint directory or s3://BUCKET/PREFIX?OPTIONS (required)")
	table := "Delta table directory or s3://BUCKET/PREFIX?OPTIONS (required)"
	if !needTable {
		table = "Delta table directory or s3://BUCKET/PREFIX?OPTIONS (optional: given, it is probed, reading only)"
	}
	c.Flags().StringVar(&f.table, "table", "", table)
	c.Flags().StringVar(&f.sink, "sink", "", "instead of --table: parquet:file:///ABS/DIR or parquet:s3://BUCKET/PREFIX?OPTIONS, Spark's file sink (Parquet part files committed by DIR/_spark_metadata; --output-mode append only)")
	c.Flags().BoolVar(&f.tableShared, "table-shared", false, "let a new checkpoint write a table another query writes (both MERGE into it by key); refused with SINK_TABLE_IN_USE otherwise")
	c.Flags().StringVar(&f.localDir, "local-dir", "", "state cache directory (default: ethstream/<checkpoint name>-<hash of its path> under $XDG_CACHE_HOME or ~/.cache); deleting it between runs is safe, it is rebuilt from the checkpoint")
	c.Flags().StringArrayVar(&f.sources, "source", nil, "NAME=FORMAT:URI with FORMAT s3archive, ethrpc, parquet, json, csv or delta, repeatable, in plan order (see SOURCES)")
	c.Flags().StringArrayVar(&f.conf, "conf", nil, "KEY=VALUE, repeatable (see CONF)")
	c.Flags().StringVar(&f.trigger, "trigger", "available-now", "availableNow | once | processingTime=DUR | realTime, or available-now, processing-time=DUR, real-time (see TRIGGERS)")
	c.Flags().IntVar(&f.maxBatches, "max-batches", 0, "stop after N data batches (0 = no limit)")
	c.Flags().StringVar(&f.progress, "progress", "", "also append this run's progress events (JSON lines) to FILE")
	c.Flags().StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464; port 0 picks a free one, logged at start; beyond loopback only with --listen-public)")
	f.sql.register(c)
}

// config checks every flag (the CLI's part of the one validation path; the
// engine checks the rest against the checkpoint before writing anything) and
// returns the pipeline configuration; its errors are usage errors. Unknown
// conf keys are logged as warnings naming the closest known key. --table is
// required unless needTable is false (plan reads no table).
func (f *queryFlags) config(logger *slog.Logger, needTable bool) (pipeline.Config, error) {
	cfg, err := f.parse(logger, needTable)
	return cfg, usage(err)
}

// build is config then pipeline.Build, which parses the source URIs: both
// look at the command line only.
func (f *queryFlags) build(logger *slog.Logger, needTable bool) (pipeline.Config, engine.Query, engine.Options, error) {
	cfg, err := f.config(logger, needTable)
	if err != nil {
		return cfg, engine.Query{}, engine.Options{}, err
	}
	q, o, err := pipeline.Build(cfg)
	return cfg, q, o, usage(err)
}

func (f *queryFlags) parse(logger *slog.Logger, needTable bool) (pipeline.Config, error) {
	cfg := pipeline.Config{Checkpoint: f.checkpoint, Table: f.table, Sink: f.sink, LocalDir: f.localDir,
		MaxBatches: f.maxBatches, Logger: logger, ProgressFile: f.progress, TableShared: f.tableShared}
	var missing []string
	if f.checkpoint == "" {
		missing = append(missing, "--checkpoint DIR (the query's checkpoint directory)")
	}
	if f.table == "" && f.sink == "" && needTable {
		missing = append(missing, "--table DIR (the Delta table the query writes)")
	}
	if f.table != "" && f.sink != "" {
		return cfg, errcode.New(errcode.InvalidArgument, "", "pass either --table DIR (a Delta table) or --sink parquet:file:///DIR",
			"--table and --sink both name the query's output")
	}
	if f.sink != "" {
		if _, err := pipeline.ParseSinkSpec(f.sink); err != nil {
			return cfg, err
		}
	}
	if len(missing) > 0 {
		return cfg, errcode.New(errcode.MissingFlag, "", "pass "+strings.Join(missing, " and "),
			"missing %s", strings.Join(flagNames(missing), " and "))
	}
	if len(f.sources) == 0 {
		return cfg, errcode.New(errcode.MissingFlag, "", "pass --source NAME=FORMAT:URI, e.g. --source 's3_backfill=s3archive:file:///data/v1.0/eth/blocks'",
			"missing --source")
	}
	if f.maxBatches < 0 {
		return cfg, errcode.New(errcode.InvalidArgument, "", "pass --max-batches N with N >= 1, or 0 (the default) for no limit",
			"--max-batches %d is negative", f.maxBatches)
	}
	for _, s := range f.sources {
		spec, err := pipeline.ParseSourceSpec(s)
		if err != nil {
			return cfg, err
		}
		cfg.Sources = append(cfg.Sources, spec)
	}
	var err error
	if cfg.Conf, err = pipeline.ParseConf(f.conf); err != nil {
		return cfg, err
	}
	warnings, err := engine.ValidateConf(cfg.Conf)
	if err != nil {
		return cfg, err
	}
	for _, w := range warnings {
		logger.Warn(w)
	}
	if cfg.Trigger, err = pipeline.ParseTrigger(f.trigger); err != nil {
		return cfg, err
	}
	if err := f.sql.apply(&cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// flagNames keeps the flag of each "--flag ARG (what)" item.
func flagNames(items []string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i], _, _ = strings.Cut(it, " ")
	}
	return out
}

func newRunCmd() *cobra.Command {
	var f queryFlags
	var uf uiFlags
	c := &cobra.Command{
		Use:     "run --checkpoint DIR --table DIR [--table-shared] --source NAME=FORMAT:URI ... [--conf K=V ...] [--trigger available-now|once|processing-time=DUR|real-time] [--max-batches N] [--progress FILE] [--metrics-addr ADDR] [--ui-addr ADDR [--ui-wait]] [--local-dir DIR] [--query SQL | --query-file FILE] [--with-watermark 'COL, DELAY'] [--output-mode update|append|complete]",
		Short:   "Run a query (the reference query unless --query) on a checkpoint and a Delta table",
		Long:    runLong,
		Example: runExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			// On a terminal one status line is redrawn in place and log lines
			// are printed above it; elsewhere a log line per batch.
			var bar *pipeline.Bar
			logOut := cmd.ErrOrStderr()
			if stderrIsTerminal(cmd) {
				bar = pipeline.NewBar(logOut, terminalWidth(cmd), barLabel(f.trigger), time.Now)
				defer bar.Close()
				logOut = bar
			}
			logger := pipeline.NewLogger(logOut)
			// Built here so that mistakes in the URIs are usage errors;
			// pipeline.Run builds the query again from cfg.
			cfg, _, _, err := f.build(logger, true)
			if err != nil {
				return err
			}
			var dash *ui.Dashboard
			var srv *ui.Server
			if uf.addr != "" {
				dash = ui.New(ui.Options{Checkpoint: cfg.Checkpoint, Mode: ui.ModeRun, Trigger: pipeline.TriggerString(cfg.Trigger)})
				if srv, err = uf.serve(dash, cmd.OutOrStdout()); err != nil {
					return err
				}
				// After the summary: --ui-wait keeps the dashboard up. Served
				// before the first log line, so its address is printed before
				// the status line is drawn.
				defer func() { err = errors.Join(err, uf.finish(cmd, srv)) }()
				dash.Started("")
				cfg.Listeners = append(cfg.Listeners, dash)
			}
			if f.metricsAddr != "" {
				m, err := serveMetrics(cmd, f.metricsAddr, logger)
				if err != nil {
					return err
				}
				cfg.Listeners = append(cfg.Listeners, m)
			}
			// One log line per batch, on a terminal above the status line.
			cfg.Listeners = append(cfg.Listeners, pipeline.LogBatches(logger))
			if bar != nil {
				cfg.Listeners = append(cfg.Listeners, bar)
			}
			sum, err := pipeline.Run(cmd.Context(), cfg)
			if bar != nil {
				bar.Close() // the summary or the error starts on a line of its own
			}
			if dash != nil {
				dash.Finished(err)
			}
			if err != nil {
				return err
			}
			printRunSummary(cmd.OutOrStdout(), sum)
			return nil
		},
	}
	f.register(c, true)
	uf.register(c)
	return c
}

// serveMetrics serves the Prometheus metrics on addr for the run.
func serveMetrics(cmd *cobra.Command, addr string, logger *slog.Logger) (*pipeline.Metrics, error) {
	m := pipeline.NewMetrics(time.Now)
	got, err := m.Serve(cmd.Context(), addr)
	if err != nil {
		// The listener's own text ends with the reason ("address
		// already in use", "missing port in address").
		reason := err.Error()
		if i := strings.LastIndex(reason, ": "); i >= 0 {
			reason = reason[i+2:]
		}
		return nil, errcode.New(errcode.InvalidArgument, "", "pass --metrics-addr HOST:PORT with a free port, e.g. 127.0.0.1:9464 (port 0 picks one)",
			"cannot serve metrics on %s: %s", addr, reason)
	}
	logger.Info("serving Prometheus metrics", "url", "http://"+got+"/metrics")
	return m, nil
}

// printRunSummary prints the run's last line: its ids and the batches it ran.
func printRunSummary(w io.Writer, sum *engine.RunSummary) {
	batches := "no new batch (nothing to do)"
	if sum.FirstBatchID >= 0 {
		batches = fmt.Sprintf("batches %d-%d", sum.FirstBatchID, sum.LastBatchID)
	}
	fmt.Fprintf(w, "query %s run %s: %s (%d data, %d no-data, %d control)%s\n",
		sum.QueryID, sum.RunID, batches, sum.DataBatches, sum.NoDataBatches, sum.ControlBatches,
		map[bool]string{true: ", interrupted", false: ""}[sum.Interrupted])
}

// newLogger is the command's logger on its stderr, in the format every
// command shares (pipeline.NewLogger).
func newLogger(cmd *cobra.Command) *slog.Logger { return pipeline.NewLogger(cmd.ErrOrStderr()) }

func init() {
	rootCmd.AddCommand(newRunCmd())
}

// terminalWidth is the column count of the command's stderr terminal.
func terminalWidth(cmd *cobra.Command) int {
	if f, ok := cmd.ErrOrStderr().(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil {
			return w
		}
	}
	return 0
}

// barLabel names the run on the status line after its trigger.
func barLabel(trigger string) string {
	if t, err := pipeline.ParseTrigger(trigger); err == nil && (t.Kind == engine.ProcessingTime || t.Kind == engine.RealTime) {
		return "live"
	}
	return "backfill"
}

// stderrIsTerminal reports whether the command's stderr is a terminal.
func stderrIsTerminal(cmd *cobra.Command) bool {
	f, ok := cmd.ErrOrStderr().(*os.File)
	return ok && isTerminal(f)
}
