package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/pipeline"
)

// The operators' shapes (issue 43, target 3): a stream-stream join, session
// windows and a transactions backfill, each against DuckDB's batch job
// giving the same answer (TestShapesEqualDuckDB checks it with -duckref).
const (
	// JoinShapeQuery joins every block with its parent: the same archive
	// read as two sources (child, parent), each with a one-minute
	// watermark, and a time range that lets the join evict both sides'
	// state as the watermarks pass.
	JoinShapeQuery = "SELECT c.number, c.miner, p.number AS parent_number, p.miner AS parent_miner " +
		"FROM child WATERMARK block_ts DELAY OF INTERVAL 1 MINUTE AS c " +
		"JOIN parent WATERMARK block_ts DELAY OF INTERVAL 1 MINUTE AS p " +
		"ON c.parent_hash = p.hash AND c.block_ts BETWEEN p.block_ts AND p.block_ts + INTERVAL 1 MINUTE"
	// JoinShapeDuckDB is its batch job: a hash join with the same range.
	JoinShapeDuckDB = `SELECT c.number, c.miner, p.number AS parent_number, p.miner AS parent_miner
		FROM {blocks} c JOIN {blocks} p ON c.parent_hash = p.hash
		AND c."timestamp" BETWEEN p."timestamp" AND p."timestamp" + INTERVAL 1 MINUTE`

	// SessionShapeQuery is session windows per miner: a miner's blocks at
	// most ten minutes apart are one session (append mode: a session is
	// written once the watermark passes its end).
	SessionShapeQuery = "SELECT session_window.start AS session_start, session_window.end AS session_end, miner, " +
		"count(*) AS blocks, sum(gas_used) AS gas_used FROM blocks GROUP BY session_window(block_ts, '10 minutes'), miner"
	SessionShapeWatermark = "block_ts, 10 minutes"
	// SessionShapeDuckDB is the same sessions in SQL: a block starts a new
	// session unless it comes at most the gap after its miner's previous
	// block (Spark's merge: a start at or before the running end), the
	// session's end its last block plus the gap. It also holds the
	// sessions still open at the end of the input, which the stream (in
	// append mode) has not written yet.
	SessionShapeDuckDB = `SELECT ts_start AS session_start, ts_end + INTERVAL 10 MINUTE AS session_end, miner, blocks, gas_used FROM (
		SELECT miner, sid, min(ts) AS ts_start, max(ts) AS ts_end, count(*) AS blocks, sum(gas_used) AS gas_used FROM (
			SELECT miner, ts, gas_used, sum(brk) OVER (PARTITION BY miner ORDER BY ts ROWS UNBOUNDED PRECEDING) AS sid FROM (
				SELECT miner, "timestamp" AS ts, gas_used,
					CASE WHEN "timestamp" - lag("timestamp") OVER (PARTITION BY miner ORDER BY "timestamp") <= INTERVAL 10 MINUTE THEN 0 ELSE 1 END AS brk
				FROM {blocks}))
		GROUP BY miner, sid)`

	// TxShapeDuckDB is TxQuery's batch job (fees per hour per transaction
	// type), as TestTxQueryEqualsDuckDB states it.
	TxShapeDuckDB = `SELECT time_bucket(INTERVAL 1 HOUR, block_timestamp) AS window_start, transaction_type, count(*) AS txs,
		sum(receipt_gas_used * receipt_effective_gas_price / 1000000000) AS fees_gwei FROM {transactions} GROUP BY ALL`
)

// shapeTransactions is BenchShape.Input of the transactions shape.
const shapeTransactions = ethtables.Transactions

// TxShapePreset is the transactions shape's archive: the last day of the
// chain with its transactions table (7,200 blocks, about 1.4 million
// transactions), generated once into the work directory (shapes-tx).
func TxShapePreset() chain.Preset { return chain.LastDaysPreset(1) }

func init() {
	benchShapes = append(benchShapes,
		BenchShape{Name: "join", What: "stream-stream join: every block with its parent (two sources, watermarks on both, a time range)",
			Config: func(c *pipeline.Config, src pipeline.SourceSpec, _ string) {
				child, parent := src, src
				child.Name, parent.Name = "child", "parent"
				c.Sources = []pipeline.SourceSpec{child, parent}
				c.Query, c.OutputMode = JoinShapeQuery, "append"
			},
			DuckDB: JoinShapeDuckDB},
		BenchShape{Name: "session", What: "session windows per miner (10-minute gap, append)",
			Config: func(c *pipeline.Config, _ pipeline.SourceSpec, _ string) {
				c.Query, c.WithWatermark, c.OutputMode = SessionShapeQuery, SessionShapeWatermark, "append"
			},
			DuckDB: SessionShapeDuckDB},
		BenchShape{Name: "transactions", Input: shapeTransactions,
			What: "transactions backfill: fees per hour per transaction type (one day, ~1.4M transactions; update mode, MERGE)",
			Config: func(c *pipeline.Config, _ pipeline.SourceSpec, _ string) {
				c.Query, c.WithWatermark = TxQuery, TxWatermark
			},
			DuckDB: TxShapeDuckDB},
	)
}

// shapeInputs are the archives the shapes read: the bench's blocks, and
// the transactions archive, prepared when a shape first needs it.
type shapeInputs struct {
	blocks pipeline.SourceSpec
	tx     pipeline.SourceSpec
	txGlob string
}

// transactions prepares the transactions archive (TxShapePreset, cached in
// the work directory by its manifest) and its source.
func (in *shapeInputs) transactions(ctx context.Context, o BenchOptions) error {
	if in.txGlob != "" {
		return nil
	}
	root := filepath.Join(o.WorkDir, "shapes-tx")
	p := TxShapePreset()
	m, err := archivegen.ReadManifest(root)
	if err != nil || m.Tables[ethtables.Transactions].Rows == 0 || m.Seed != o.Seed || m.Preset != p.Name {
		fmt.Fprintf(o.Log, "generate the transactions archive (%s) in %s ...\n", p.Name, root)
		if err := os.RemoveAll(root); err != nil {
			return fmt.Errorf("clear %s: %w", root, err)
		}
		if m, err = archivegen.Generate(ctx, archivegen.Options{Out: root, Preset: p, Seed: o.Seed,
			Tables: []string{ethtables.Transactions}}); err != nil {
			return err
		}
	}
	// The shape's leg runs before DuckDB's job: a cached archive read cold
	// would cost the leg alone its disk reads (2.32x in one seed run, the
	// leg 0.64 cores busy, 0.73-0.91x in the runs after it).
	fmt.Fprintf(o.Log, "warm the page cache (transactions archive) ...\n")
	if err := warmPageCache(ctx, root, m.Tables[ethtables.Transactions].Files); err != nil {
		return err
	}
	dir := filepath.Join(root, filepath.FromSlash(archivegen.TablePrefix(ethtables.Transactions)))
	in.tx = pipeline.SourceSpec{Name: ArchiveSource, Format: "s3archive", URI: "file://" + filepath.ToSlash(dir)}
	in.txGlob = filepath.Join(dir, "*", "*.parquet")
	return nil
}

// duckRun is one run of DuckDB's process: wall and user+system CPU time
// (milliseconds), its peak RSS and its output.
type duckRun struct {
	wallMs, cpuMs, peakRSS int64
	out                    string
}

// duckPeakRSS is the peak RSS duckref's copysql prints (its VmHWM): the
// kernel's maxrss of a child would count this process's pages at the fork.
var duckPeakRSS = regexp.MustCompile(`peak RSS (\d+) kB`)

// duckProcess runs bin with args as its own process, as timeProcess does,
// and also reads the peak RSS it prints.
func duckProcess(ctx context.Context, bin string, args ...string) (duckRun, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	t := time.Now()
	b, err := cmd.CombinedOutput()
	if err != nil {
		return duckRun{}, fmt.Errorf("duckdb reference %s %s: %w\n%s", bin, strings.Join(args, " "), err, b)
	}
	r := duckRun{wallMs: time.Since(t).Milliseconds(), out: strings.TrimSpace(string(b)),
		cpuMs: (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Milliseconds()}
	if m := duckPeakRSS.FindStringSubmatch(r.out); m != nil {
		kb, _ := strconv.ParseInt(m[1], 10, 64)
		r.peakRSS = kb * 1024
	}
	return r, nil
}
