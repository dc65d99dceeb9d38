package demo

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/sink/files"
)

// The restart-rules scenario: a backfill checkpoint (the archive minus its
// last day) and, for every row of the restart-compatibility table plus
// ethstream's stricter rules, a restart with that one change on a fresh copy
// of the checkpoint and table. Each row records the change, Spark's rule,
// ethstream's, the outcome, the code, the first batch an allowed change
// applies to, and whether a refused start left the checkpoint and the table
// byte-identical. It writes results/restart-rules.csv.

// RestartRule is one row of restart-rules.csv.
type RestartRule struct {
	Change    string
	SparkRule string
	OurRule   string
	Expected  string // allowed | refused
	Outcome   string // allowed | refused | error
	Code      string
	// FirstBatch is the first batch an allowed change applies to (-1 n/a).
	FirstBatch int64
	// Unchanged: for a refusal, the checkpoint and the table are
	// byte-identical after the start.
	Unchanged bool
	Detail    string
}

// Pass reports whether the row behaved as the rule says.
func (r RestartRule) Pass() bool {
	return r.Outcome == r.Expected && (r.Outcome != "refused" || r.Unchanged)
}

// RestartRulesFile is the scenario's results file.
const RestartRulesFile = "restart-rules.csv"

// rrCase is one change: how the restarted query differs from the backfill's.
type rrCase struct {
	change, spark, ours, expected, code string
	// setup runs first on the copy (a previous start the change is relative
	// to, e.g. one with a filter before it is removed).
	setup  func(c *pipeline.Config, e *rrEnv)
	modify func(c *pipeline.Config, e *rrEnv)
	// pending deletes the last commit before the restart, so the restart
	// re-runs an uncommitted batch.
	pending bool
	// positional uses the baseline without source evolution.
	positional bool
	// fresh starts from an empty checkpoint and table instead of the
	// baseline: the setup start is the query the change is relative to
	// (a join, whose state the aggregation baseline does not hold).
	fresh bool
	// fileSink uses the baseline that wrote with the file sink (--sink
	// parquet:, append mode) instead of the Delta table.
	fileSink bool
}

// rrOutput is the output directory of cfg: the file sink's, else the Delta
// table's.
func rrOutput(cfg pipeline.Config) string {
	if cfg.Sink != "" {
		return strings.TrimPrefix(strings.TrimPrefix(cfg.Sink, "parquet:"), "file://")
	}
	return cfg.Table
}

type rrEnv struct {
	*Env
	o    Options
	live pipeline.SourceSpec
}

// rrJoin is the join the join rows start from: the archive's blocks
// joined with the live node's by hash, each relation with its own
// watermark (Databricks' WATERMARK clause).
const rrJoin = "SELECT a.number, a.hash, b.miner FROM s3_backfill WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS a " +
	"LEFT OUTER JOIN eth_live WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS b " +
	"ON a.hash = b.hash AND b.block_ts BETWEEN a.block_ts AND a.block_ts + INTERVAL 1 MINUTE"

// rrJoinAgg is the join followed by an aggregation (operators 0 and 1):
// per miner and hour of the archive's blocks, how many the live node saw
// too, in append mode.
const rrJoinAgg = "SELECT a.miner, window(a.block_ts, '1 hour') AS window, count(*) AS blocks, count(b.hash) AS seen " +
	"FROM s3_backfill WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS a " +
	"LEFT OUTER JOIN eth_live WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS b " +
	"ON a.hash = b.hash AND b.block_ts BETWEEN a.block_ts AND a.block_ts + INTERVAL 1 MINUTE " +
	"GROUP BY a.miner, window(a.block_ts, '1 hour')"

// rrJoinAggInner is rrJoinAgg with an inner join, which needs no
// watermark on either relation.
var rrJoinAggInner = strings.Replace(rrJoinAgg, "LEFT OUTER JOIN", "JOIN", 1)

const rrFilter = "SELECT window(block_ts, '5 minutes') AS window, source, miner, count(*) AS count FROM blocks WHERE gas_used > 15000000 GROUP BY window(block_ts, '5 minutes'), source, miner"

func restartCases() []rrCase {
	withQuery := func(q string) func(c *pipeline.Config, _ *rrEnv) {
		return func(c *pipeline.Config, _ *rrEnv) { c.Query, c.WithWatermark = q, pipeline.ReferenceWatermark }
	}
	allowedFrom := "allowed, logged with the first batch it applies to"
	// withJoin runs q over the archive and the live node, one batch.
	withJoin := func(q string) func(c *pipeline.Config, e *rrEnv) {
		return func(c *pipeline.Config, e *rrEnv) {
			c.Query, c.WithWatermark, c.OutputMode = q, "", ""
			c.Sources = []pipeline.SourceSpec{c.Sources[0], e.live}
			c.MaxBatches = 1
		}
	}
	// withJoinDedup is withJoin with a deduplication of the relations'
	// rows cols name, before the join.
	withJoinDedup := func(q, cols string) func(c *pipeline.Config, e *rrEnv) {
		return func(c *pipeline.Config, e *rrEnv) {
			withJoin(q)(c, e)
			c.DropDuplicates = cols
		}
	}
	withJoinAgg := func(q string) func(c *pipeline.Config, e *rrEnv) {
		return func(c *pipeline.Config, e *rrEnv) {
			withJoin(q)(c, e)
			c.OutputMode = "append"
		}
	}
	return []rrCase{
		{change: "add a filter (WHERE gas_used > 15000000)", spark: "allowed", ours: allowedFrom, expected: "allowed",
			modify: withQuery(rrFilter)},
		{change: "remove the filter", spark: "allowed", ours: allowedFrom, expected: "allowed",
			setup:  func(c *pipeline.Config, _ *rrEnv) { c.Query, c.WithWatermark = rrFilter, pipeline.ReferenceWatermark },
			modify: func(c *pipeline.Config, _ *rrEnv) { c.Query, c.WithWatermark = "", "" }},
		{change: "rate limit maxFilesPerTrigger 1 -> 2", spark: "allowed, from the next newly planned batch", ours: "allowed, from the next newly planned batch", expected: "allowed",
			modify: func(c *pipeline.Config, e *rrEnv) { c.Sources[0] = e.ArchiveSource(2) }},
		{change: "trigger available-now -> processing-time=10ms", spark: "allowed, from the next newly planned batch", ours: "allowed, from the next newly planned batch", expected: "allowed",
			modify: func(c *pipeline.Config, _ *rrEnv) {
				c.Trigger = engine.Trigger{Kind: engine.ProcessingTime, Interval: 10 * time.Millisecond}
				c.MaxBatches = 1
			}},
		{change: "projection, same output schema (SELECT items reordered)", spark: "allowed", ours: "allowed", expected: "allowed",
			modify: withQuery("SELECT source, miner, window, count(*) AS count FROM blocks GROUP BY window(block_ts, '5 minutes'), source, miner")},
		{change: "projection, another output schema (count AS blocks)", spark: "only if the sink allows it", ours: "refused: the Delta table keeps its schema",
			expected: "refused", code: errcode.OutputSchemaMismatch,
			modify: withQuery("SELECT window, source, miner, count(*) AS blocks FROM blocks GROUP BY window(block_ts, '5 minutes'), source, miner")},
		{change: "add a source, without source evolution", spark: "not allowed by default", ours: "refused", expected: "refused", code: errcode.SourceCountMismatch,
			positional: true, modify: func(c *pipeline.Config, e *rrEnv) { l := e.live; l.Name = ""; c.Sources = append(c.Sources, l) }},
		{change: "add a source (eth_live), with source evolution", spark: "source evolution relaxes it", ours: "allowed: the new source starts at its configured start", expected: "allowed",
			modify: func(c *pipeline.Config, e *rrEnv) { c.Sources = append(c.Sources, e.live) }},
		{change: "source type: s3_backfill now an ethrpc source", spark: "not allowed by default; source evolution relaxes it", ours: "refused: offsets of another provider (use a new name)",
			expected: "refused", code: errcode.SourceProviderChanged,
			modify: func(c *pipeline.Config, e *rrEnv) { l := e.live; l.Name = ArchiveSource; c.Sources[0] = l }},
		{change: "source location: s3_backfill reads another prefix", spark: "generally needs a new checkpoint; results unpredictable", ours: "refused: offsets are positions in the old location (use a new name)",
			expected: "refused", code: errcode.SourceLocationChanged,
			modify: func(c *pipeline.Config, _ *rrEnv) {
				c.Sources[0].URI = strings.Replace(c.Sources[0].URI, "/v1.0/eth/blocks", "/v1.1/eth/blocks", 1)
			}},
		{change: "sink output directory, no table there", spark: "not allowed", ours: "refused: a new table would lack every committed batch", expected: "refused", code: errcode.SinkLocationChanged,
			modify: func(c *pipeline.Config, _ *rrEnv) { c.Table += "-moved" }},
		{change: "sink output directory, the table moved there (mv)", spark: "not allowed", ours: "allowed: the same table by its Delta metadata id and txn; logged", expected: "allowed",
			modify: func(c *pipeline.Config, _ *rrEnv) {
				// mv as copy then delete (every write goes through durable);
				// a failure leaves no table there and the row fails.
				if copyTree(c.Table, c.Table+"-moved") == nil {
					_ = os.RemoveAll(c.Table)
				}
				c.Table += "-moved"
			}},
		{change: "sink type: the Delta table -> a file sink (parquet)", spark: "changes between a few specific combinations of sinks are allowed, case by case",
			ours: "refused: the new sink holds none of the committed batches' output", expected: "refused", code: errcode.SinkLocationChanged,
			modify: func(c *pipeline.Config, _ *rrEnv) {
				c.Sink, c.OutputMode = "parquet:"+filepath.Join(filepath.Dir(c.Table), "out"), "append"
				c.Table = ""
			}},
		{change: "file sink output directory", spark: "not allowed", ours: "refused: the log and part files stay in the old directory",
			expected: "refused", code: errcode.SinkLocationChanged, fileSink: true,
			modify: func(c *pipeline.Config, _ *rrEnv) { c.Sink += "-moved" }},
		{change: "file sink output mode append -> update", spark: "the sink must support the mode: a file sink supports append only",
			ours: "refused, as Spark refuses it", expected: "refused", code: files.UnsupportedOutputMode, fileSink: true,
			modify: func(c *pipeline.Config, _ *rrEnv) { c.OutputMode = "update" }},
		{change: "sink output directory, another query's table", spark: "not allowed", ours: "refused, naming both table ids", expected: "refused", code: errcode.SinkTableMismatch,
			modify: func(c *pipeline.Config, _ *rrEnv) {
				c.Table = filepath.Join(filepath.Dir(c.Table), "baseline-evolution-false", "table")
			}},
		{change: "grouping keys (drop source)", spark: "not allowed: state schema", ours: "refused", expected: "refused", code: errcode.StateSchemaMismatch,
			modify: withQuery("SELECT window, miner, count(*) AS count FROM blocks GROUP BY window(block_ts, '5 minutes'), miner")},
		{change: "aggregates (add sum(gas_used))", spark: "not allowed: state schema", ours: "refused", expected: "refused", code: errcode.StateSchemaMismatch,
			modify: withQuery("SELECT window, source, miner, count(*) AS count, sum(gas_used) FROM blocks GROUP BY window(block_ts, '5 minutes'), source, miner")},
		{change: "aggregation column (count(*) -> count(gas_used))", spark: "requires a full refresh", ours: "refused", expected: "refused", code: errcode.StateSchemaMismatch,
			modify: withQuery("SELECT window, source, miner, count(gas_used) AS count FROM blocks GROUP BY window(block_ts, '5 minutes'), source, miner")},
		{change: "watermark delay 48 hours -> 96 hours", spark: "requires a full refresh", ours: "refused (stricter): evicted windows would restart from zero and overwrite full counts",
			expected: "refused", code: errcode.WatermarkDelayIncreased,
			modify: func(c *pipeline.Config, _ *rrEnv) { c.WithWatermark = "block_ts, 96 hours" }},
		{change: "watermark delay 48 hours -> 24 hours", spark: "requires a full refresh", ours: "allowed (looser): the watermark only moves forward; logged",
			expected: "allowed", modify: func(c *pipeline.Config, _ *rrEnv) { c.WithWatermark = "block_ts, 24 hours" }},
		{change: "watermark removed", spark: "requires a full refresh", ours: "refused: evicted windows would restart from zero", expected: "refused", code: errcode.WatermarkChanged,
			modify: func(c *pipeline.Config, _ *rrEnv) { c.Query, c.WithWatermark = pipeline.ReferenceQuery, "" }},
		{change: "output mode update -> append", spark: "not in the table (the sink must support the mode)",
			ours:     "refused: the Delta sink appends in append mode, and windows update mode already wrote would be appended again when final",
			expected: "refused", code: errcode.OutputModeChanged,
			modify: func(c *pipeline.Config, _ *rrEnv) { c.OutputMode = "append" }},
		{change: "session gap 2 minutes -> 5 minutes (session_window)", spark: "not checked: the state schema has no gap (stored sessions merged under the old gap meet rows under the new one)",
			ours: "refused: the state schema records the gap", expected: "refused", code: errcode.StateSchemaMismatch, fresh: true,
			setup: func(c *pipeline.Config, _ *rrEnv) { sessionQuery(c, "2 minutes") }, modify: func(c *pipeline.Config, _ *rrEnv) { sessionQuery(c, "5 minutes") }},
		{change: "output mode update -> complete", spark: "not in the table (the sink must support the mode)",
			ours: "allowed: each batch replaces the table with every group in state; logged", expected: "allowed",
			modify: func(c *pipeline.Config, _ *rrEnv) { c.OutputMode = "complete" }},
		{change: "join type (LEFT OUTER JOIN -> JOIN)", spark: "not allowed: join type or equi-join columns changed", ours: "refused: the state schema check",
			expected: "refused", code: errcode.StateSchemaMismatch, fresh: true, setup: withJoin(rrJoin),
			modify: withJoin(strings.Replace(rrJoin, "LEFT OUTER JOIN", "JOIN", 1))},
		{change: "equi-join columns (add number)", spark: "not allowed: join type or equi-join columns changed", ours: "refused: the state schema check",
			expected: "refused", code: errcode.StateSchemaMismatch, fresh: true, setup: withJoin(rrJoin),
			modify: withJoin(strings.Replace(rrJoin, "ON a.hash = b.hash", "ON a.hash = b.hash AND a.number = b.number", 1))},
		{change: "join then aggregation: a relation's watermark delay 1 hour -> 30 minutes", spark: "allowed: the watermark delay may change; another event-time column requires a full refresh",
			ours: "allowed, from the next newly planned batch (logged)", expected: "allowed", fresh: true, setup: withJoinAgg(rrJoinAgg),
			modify: withJoinAgg(strings.Replace(rrJoinAgg, "eth_live WATERMARK block_ts DELAY OF INTERVAL 1 HOUR", "eth_live WATERMARK block_ts DELAY OF INTERVAL 30 MINUTES", 1))},
		{change: "join then aggregation: a relation's watermark removed (inner join)", spark: "requires a full refresh",
			ours: "refused: the join's state was stored and evicted by the old event time", expected: "refused", code: errcode.WatermarkChanged, fresh: true, setup: withJoinAgg(rrJoinAggInner),
			modify: withJoinAgg(strings.Replace(rrJoinAggInner, "eth_live WATERMARK block_ts DELAY OF INTERVAL 1 HOUR", "eth_live", 1))},
		{change: "join then aggregation: the window of operator 0 (1 hour -> 30 minutes)", spark: "not allowed: the state schema check",
			ours: "refused: the state schema check", expected: "refused", code: errcode.StateSchemaMismatch, fresh: true, setup: withJoinAgg(rrJoinAgg),
			modify: withJoinAgg(strings.ReplaceAll(rrJoinAgg, "'1 hour'", "'30 minutes'"))},
		{change: "join then aggregation: join type (LEFT OUTER JOIN -> JOIN)", spark: "not allowed: join type or equi-join columns changed", ours: "refused: the state schema check",
			expected: "refused", code: errcode.StateSchemaMismatch, fresh: true, setup: withJoinAgg(rrJoinAgg),
			modify: withJoinAgg(strings.Replace(rrJoinAgg, "LEFT OUTER JOIN", "JOIN", 1))},
		{change: "join then aggregation: the aggregation removed", spark: sparkOperatorsRule, ours: "refused: its state would be left behind",
			expected: "refused", code: errcode.StateSchemaMismatch, fresh: true, setup: withJoinAgg(rrJoinAgg), modify: withJoin(rrJoin)},
		// A deduplication on a join's relation (Spark's
		// a.dropDuplicates("hash").join(b, ...): operator 1, below the join).
		{change: "add a deduplication on a join's relation (--drop-duplicates a.hash, operator 1 below the join)", spark: sparkOperatorsRule,
			ours: "refused: a new operator has no state", expected: "refused", code: errcode.StateSchemaMismatch, fresh: true,
			setup: withJoin(rrJoin), modify: withJoinDedup(rrJoin, "a.hash")},
		{change: "remove the deduplication on a join's relation", spark: sparkOperatorsRule, ours: "refused: its state would be left behind",
			expected: "refused", code: errcode.StateSchemaMismatch, fresh: true, setup: withJoinDedup(rrJoin, "a.hash"), modify: withJoin(rrJoin)},
		{change: "the deduplication moved to the join's other relation (a.hash -> b.hash)", spark: sparkOperatorsRule,
			ours: "refused: its state holds the other relation's rows", expected: "refused", code: errcode.StateSchemaMismatch, fresh: true,
			setup: withJoinDedup(rrJoin, "a.hash"), modify: withJoinDedup(rrJoin, "b.hash")},
		{change: "a join relation's deduplication columns (a.hash -> a.hash, a.number)", spark: "not allowed: the number or types of the columns must not change (state schema)",
			ours: "refused: the state is keyed by the old columns", expected: "refused", code: errcode.StateSchemaMismatch, fresh: true,
			setup: withJoinDedup(rrJoin, "a.hash"), modify: withJoinDedup(rrJoin, "a.hash, a.number")},
		{change: "add a deduplication (--drop-duplicates hash, operator 1)", spark: sparkOperatorsRule, ours: "refused: a new operator has no state",
			expected: "refused", code: errcode.StateSchemaMismatch, modify: func(c *pipeline.Config, _ *rrEnv) { c.DropDuplicates = "hash" }},
		{change: "remove the deduplication", spark: sparkOperatorsRule, ours: "refused: its state would be left behind", expected: "refused",
			code: errcode.StateSchemaMismatch, fresh: true, setup: dedupHash, modify: func(c *pipeline.Config, _ *rrEnv) { c.DropDuplicates = "" }},
		{change: "deduplication columns (hash -> hash, miner)", spark: "not allowed: the number or types of the columns must not change (state schema)",
			ours: "refused: the state is keyed by the old columns", expected: "refused", code: errcode.StateSchemaMismatch, fresh: true, setup: dedupHash,
			modify: func(c *pipeline.Config, _ *rrEnv) { c.DropDuplicates = "hash, miner" }},
		{change: "dropDuplicates(hash) -> dropDuplicatesWithinWatermark(hash)", spark: "not allowed: another state schema (expiresAtMicros value)",
			ours: "refused: another state schema", expected: "refused", code: errcode.StateSchemaMismatch, fresh: true, setup: dedupHash,
			modify: func(c *pipeline.Config, _ *rrEnv) { c.DropDuplicates, c.DropDuplicatesWithinWatermark = "", "hash" }},
		{change: "any change (a filter) with a planned, uncommitted batch", spark: "the planned batch re-runs first with the same data", ours: "the same: its recorded offsets and watermark",
			expected: "allowed", pending: true, modify: withQuery(rrFilter)},
	}
}

// sparkOperatorsRule is Spark's rule for a stateful operator added or
// removed: the state schema and operator metadata checks refuse it.
const sparkOperatorsRule = "not allowed: stateful operations may not change between restarts (state schema check)"

// dedupHash is the setup start of the deduplication's rows: the query with
// --drop-duplicates 'hash' on a new checkpoint.
func dedupHash(c *pipeline.Config, _ *rrEnv) { c.DropDuplicates = "hash" }

// sessionQuery sets c's query to the miners' sessions with the given gap
// (complete mode, no watermark).
func sessionQuery(c *pipeline.Config, gap string) {
	c.Query = "SELECT session_window.start AS session_start, session_window.end AS session_end, miner, count(*) AS blocks FROM blocks " +
		"GROUP BY session_window(block_ts, '" + gap + "'), miner"
	c.WithWatermark, c.OutputMode = "", "complete"
}

// RestartRules runs the scenario and writes results/restart-rules.csv.
func RestartRules(ctx context.Context, o Options) ([]RestartRule, error) {
	o.defaults()
	env, err := Setup(ctx, o)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	e := &rrEnv{Env: env, o: o, live: env.LiveSource(o.BlocksPerBatch)}
	root := filepath.Join(o.WorkDir, "restart-rules")
	if err := os.RemoveAll(root); err != nil {
		return nil, fmt.Errorf("clear %s: %w", root, err)
	}
	ck, table, cache := filepath.Join(root, "checkpoint"), filepath.Join(root, "table"), filepath.Join(root, "state-cache")
	out := filepath.Join(root, "out")
	// The backfill: every archive file but the last, one per batch, so an
	// allowed restart has a day left to run.
	days := len(env.Manifest.Files)
	if days < 2 {
		return nil, errcode.New(errcode.InvalidArgument, "", "use --days 2 or more", "the restart-rules scenario needs at least two archive days")
	}
	// Few state partitions: the scenario is about the rules, not throughput.
	const partitions = 4
	base := func(evolution bool) pipeline.Config {
		src := env.ArchiveSource(1)
		conf := EvolutionConf(partitions)
		if !evolution {
			src.Name = ""
			conf = map[string]string{"spark.sql.shuffle.partitions": strconv.Itoa(partitions)}
		}
		return pipeline.Config{Checkpoint: ck, Table: table, LocalDir: cache, Sources: []pipeline.SourceSpec{src}, Conf: conf,
			Trigger: engine.Trigger{Kind: engine.AvailableNow}, MaxBatches: 1, Logger: o.Logger}
	}
	// The file sink's baseline: the reference query in append mode into
	// --sink parquet:out.
	fileBase := func() pipeline.Config {
		cfg := base(true)
		cfg.Table, cfg.Sink, cfg.OutputMode = "", "parquet:"+out, "append"
		return cfg
	}
	baselines := map[string]string{}
	for _, name := range []string{"evolution-true", "evolution-false", "filesink"} {
		cfg := base(name != "evolution-false")
		if name == "filesink" {
			cfg = fileBase()
		}
		cfg.MaxBatches = days - 1
		if err := os.RemoveAll(cache); err != nil {
			return nil, err
		}
		if _, err := pipeline.Run(ctx, cfg); err != nil {
			return nil, fmt.Errorf("restart-rules backfill: %w", err)
		}
		// Kept aside: every case restores it into the same paths, which the
		// recorded shape names.
		b := filepath.Join(root, "baseline-"+name)
		for _, d := range [][2]string{{ck, "checkpoint"}, {rrOutput(cfg), "table"}} {
			if err := copyTree(d[0], filepath.Join(b, d[1])); err != nil {
				return nil, err
			}
			if err := os.RemoveAll(d[0]); err != nil {
				return nil, err
			}
		}
		baselines[name] = b
	}
	var rows []RestartRule
	for _, c := range restartCases() {
		r := RestartRule{Change: c.change, SparkRule: c.spark, OurRule: c.ours, Expected: c.expected, FirstBatch: -1}
		name, cfg := "evolution-true", base(true)
		switch {
		case c.positional:
			name, cfg = "evolution-false", base(false)
		case c.fileSink:
			name, cfg = "filesink", fileBase()
		}
		if err := e.runCase(ctx, c, baselines[name], cfg, &r); err != nil {
			r.Outcome, r.Detail = "error", err.Error()
		}
		if c.code != "" && r.Code != c.code {
			r.Outcome = "error"
			r.Detail = fmt.Sprintf("want code %s; %s", c.code, r.Detail)
		}
		fmt.Fprintf(o.Out, "%-60s %-8s %-30s %s\n", r.Change, r.Outcome, r.Code, map[bool]string{true: "ok", false: "FAIL"}[r.Pass()])
		rows = append(rows, r)
	}
	if err := os.MkdirAll(o.ResultsDir, 0o755); err != nil {
		return rows, err
	}
	err = writeFile(filepath.Join(o.ResultsDir, RestartRulesFile), func(w io.Writer) error { return writeRestartRules(w, rows) })
	return rows, err
}

// prepareCase lays out a case's fresh copy of the baseline checkpoint and
// table, runs its setup start, and for a case with a pending batch removes
// the last commit, returning that batch's offsets entry (path and bytes) to
// compare after the restart.
func prepareCase(ctx context.Context, c rrCase, baseline string, cfg pipeline.Config, e *rrEnv) (string, []byte, error) {
	dir := filepath.Dir(cfg.Checkpoint)
	for _, d := range []string{cfg.Checkpoint, filepath.Join(dir, "table"), filepath.Join(dir, "table-moved"), filepath.Join(dir, "out"), filepath.Join(dir, "out-moved"), cfg.LocalDir} {
		if err := os.RemoveAll(d); err != nil {
			return "", nil, err
		}
	}
	if !c.fresh {
		if err := copyTree(filepath.Join(baseline, "checkpoint"), cfg.Checkpoint); err != nil {
			return "", nil, err
		}
		if err := copyTree(filepath.Join(baseline, "table"), rrOutput(cfg)); err != nil {
			return "", nil, err
		}
	}
	if c.setup != nil {
		s := cfg
		c.setup(&s, e)
		if _, err := pipeline.Run(ctx, s); err != nil {
			return "", nil, fmt.Errorf("setup start: %w", err)
		}
	}
	var pendingOffsets string
	var pendingEntry []byte
	if c.pending {
		d := checkpoint.Dir{FS: vfs.Default, Path: cfg.Checkpoint}
		ids, err := d.ListCommits()
		if err != nil || len(ids) == 0 {
			return "", nil, fmt.Errorf("no commit to make pending: %v", err)
		}
		if err := os.Remove(d.CommitPath(ids[len(ids)-1])); err != nil {
			return "", nil, err
		}
		pendingOffsets = d.OffsetsPath(ids[len(ids)-1])
		if pendingEntry, err = os.ReadFile(pendingOffsets); err != nil {
			return "", nil, err
		}
	}
	return pendingOffsets, pendingEntry, nil
}

// runCase restores the baseline into the scenario's paths, applies the
// change and restarts once.
func (e *rrEnv) runCase(ctx context.Context, c rrCase, baseline string, cfg pipeline.Config, r *RestartRule) error {
	pendingOffsets, pendingEntry, err := prepareCase(ctx, c, baseline, cfg, e)
	if err != nil {
		return err
	}
	c.modify(&cfg, e)
	before, err := e.hashes(cfg)
	if err != nil {
		return err
	}
	sum, runErr := pipeline.Run(ctx, cfg)
	after, err := e.hashes(cfg)
	if err != nil {
		return err
	}
	r.Unchanged = before == after
	if runErr != nil {
		r.Code = errcode.Code(runErr)
		r.Outcome, r.Detail = "refused", runErr.Error()
		if r.Code == "" {
			r.Outcome = "error"
		}
		return nil
	}
	r.Outcome = "allowed"
	rec, err := shape.ReadLatest(vfs.Default, cfg.Checkpoint)
	if err != nil {
		return err
	}
	if rec != nil {
		r.FirstBatch = rec.FirstBatchID
	}
	var notes []string
	if sum.RerunBatchID >= 0 {
		notes = append(notes, fmt.Sprintf("re-ran batch %d first", sum.RerunBatchID))
		if c.pending && rec != nil && rec.FirstBatchID != sum.RerunBatchID {
			return fmt.Errorf("the change applies from batch %d, not the re-run batch %d", rec.FirstBatchID, sum.RerunBatchID)
		}
	} else if c.pending {
		return errors.New("no batch was re-run")
	}
	if c.pending {
		// The same data: the re-run used the recorded offsets entry as is.
		after, err := os.ReadFile(pendingOffsets)
		if err != nil || string(after) != string(pendingEntry) {
			return fmt.Errorf("the pending batch's offsets entry %s changed: %v", pendingOffsets, err)
		}
		notes = append(notes, "its offsets entry unchanged")
	}
	if sum.FirstBatchID < 0 {
		notes = append(notes, "no new data: no batch ran")
	} else {
		notes = append(notes, fmt.Sprintf("ran batches %d-%d", sum.FirstBatchID, sum.LastBatchID))
	}
	notes = append(notes, sum.Warnings...)
	r.Detail = strings.Join(notes, "; ")
	return nil
}

// hashes is the content hash of the checkpoint and the outputs (the table
// or the file sink's directory, and the moved output's directory, which a
// refused start must not create).
func (e *rrEnv) hashes(cfg pipeline.Config) (string, error) {
	var parts []string
	dir := filepath.Dir(cfg.Checkpoint)
	for _, d := range []string{cfg.Checkpoint, filepath.Join(dir, "table"), filepath.Join(dir, "out")} {
		if _, err := os.Stat(d); err != nil {
			parts = append(parts, "absent")
			continue
		}
		h, err := TreeHash(d)
		if err != nil {
			return "", err
		}
		parts = append(parts, h)
	}
	if _, err := os.Stat(rrOutput(cfg)); err == nil {
		parts = append(parts, "output:"+rrOutput(cfg))
	}
	return strings.Join(parts, ","), nil
}

func writeRestartRules(w io.Writer, rows []RestartRule) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"change", "spark_rule", "our_rule", "expected", "outcome", "code", "first_batch", "checkpoint_unchanged", "pass", "detail"}); err != nil {
		return err
	}
	for _, r := range rows {
		first := ""
		if r.FirstBatch >= 0 && r.Outcome == "allowed" {
			first = strconv.FormatInt(r.FirstBatch, 10)
		}
		unchanged := ""
		if r.Outcome == "refused" {
			unchanged = strconv.FormatBool(r.Unchanged)
		}
		if err := cw.Write([]string{r.Change, r.SparkRule, r.OurRule, r.Expected, r.Outcome, r.Code, first, unchanged, strconv.FormatBool(r.Pass()), r.Detail}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// copyTree copies the files under src to dst (created), through the one
// publish primitive like every other file ethstream writes.
func copyTree(src, dst string) error {
	pub := durable.For(vfs.Default)
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return durable.EnsureDir(vfs.Default, target)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = durable.Bytes(pub, filepath.Dir(target), filepath.Base(target), durable.Options{Mode: durable.Replace, NoDirSync: true}, b)
		return err
	})
}
