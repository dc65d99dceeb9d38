package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/pipeline"
)

// BenchShape is a yardstick for one query shape: ethstream running the
// query over the bench's archive (file://, availableNow, a checkpoint and
// table of its own) against DuckDB's batch job over the same files, its
// result written to Parquet, in the same run (`ethstream bench --shape
// NAME`). Adding a shape is one entry in benchShapes (a new operator's
// branch appends its own in an init function of its own file).
type BenchShape struct {
	Name string
	// What says what the shape measures, for the table.
	What string
	// Config sets the run's query, output mode and sources: src is the
	// archive's blocks as a file:// source, dir the shape's directory
	// (kept between shapes, so one shape may read another's table).
	Config func(c *pipeline.Config, src pipeline.SourceSpec, dir string)
	// DuckDB is DuckDB's job as SQL, COPY'd to a Parquet file: {blocks}
	// stands for read_parquet over the archive's files, {dir} for the
	// shape directory's path.
	DuckDB string
	// Needs names a shape whose table this one reads: it runs first
	// (untimed) when its table is missing.
	Needs string
	// Input is the archive table the shape reads: "" the bench's blocks,
	// shapeTransactions the transactions archive of bench_shapes_input.go
	// (src and {transactions} then stand for it).
	Input string
}

// ShapeLimit is the shapes' target: ethstream's wall time at most this
// times DuckDB's on the same input in the same run.
const ShapeLimit = 1.5

// benchShapes are the shapes `--shape` names, in the order they run.
var benchShapes = []BenchShape{
	{Name: "stateless", What: "Parquet -> Delta append: a projection and a WHERE, no state",
		Config: func(c *pipeline.Config, src pipeline.SourceSpec, _ string) {
			c.Query = "SELECT number, miner, gas_used FROM blocks WHERE transaction_count > 150"
			c.OutputMode = "append"
		},
		DuckDB: `SELECT number, miner, gas_used FROM {blocks} WHERE transaction_count > 150`},
	// The product is taken in DOUBLE: base fee x gas used overflows a bigint
	// on mainnet's fees (up to ~1e12 wei x 30M gas > 2^63), and Spark's ANSI
	// mode raises ARITHMETIC_OVERFLOW there, as ethstream did on the seed
	// archive (DuckDB raises its own overflow error).
	{Name: "burned-fees", What: "expression-heavy aggregation: fees burned per hour (update mode, MERGE)",
		Config: func(c *pipeline.Config, src pipeline.SourceSpec, _ string) {
			c.Query = "SELECT date_trunc('HOUR', block_ts) AS hour, sum(CAST(base_fee_per_gas AS DOUBLE) * gas_used / 1e18) AS burned_eth, " +
				"count(*) AS blocks FROM blocks GROUP BY date_trunc('HOUR', block_ts)"
		},
		DuckDB: `SELECT date_trunc('hour', "timestamp") AS hour, sum(CAST(base_fee_per_gas AS DOUBLE) * gas_used / 1e18) AS burned_eth,
			count(*) AS blocks FROM {blocks} GROUP BY ALL`},
	{Name: "dedup", What: "--drop-duplicates hash over two sources on the same archive, then count(*)",
		Config: func(c *pipeline.Config, src pipeline.SourceSpec, _ string) {
			b := src
			b.Name = "s3_backfill_b"
			c.Sources = append(c.Sources, b)
			c.Query, c.DropDuplicates = "SELECT count(*) AS n FROM blocks", "hash"
			c.OutputMode = "complete"
		},
		DuckDB: `SELECT count(*) AS n FROM (SELECT DISTINCT hash FROM (SELECT hash FROM {blocks} UNION ALL SELECT hash FROM {blocks}))`},
	{Name: "delta-to-delta", What: "a Delta source (the stateless shape's table) feeding a Delta sink, append",
		Needs: "stateless",
		Config: func(c *pipeline.Config, _ pipeline.SourceSpec, dir string) {
			// maxFilesPerTrigger bounds a batch, as Spark users bound one
			// with it: the sink takes a batch's rows at once, so Delta's
			// default (1000 files: the seed table's 87 in one batch) held
			// the whole table, 1.0 GB of RSS against 280 MB at 4 files
			// (about 520k rows) a batch, and 0.9 CPU-s more.
			c.Sources = []pipeline.SourceSpec{{Name: "big_blocks", Format: "delta",
				URI: "file://" + filepath.ToSlash(shapeTable(dir, "stateless")) + "?maxFilesPerTrigger=4"}}
			c.Query = "SELECT number, miner FROM big_blocks WHERE gas_used > 10000000"
			c.OutputMode = "append"
		},
		DuckDB: `SELECT number, miner FROM read_parquet('{dir}/stateless/table/*.parquet') WHERE gas_used > 10000000`},
}

// duckParquet is DuckDB's read of the Parquet files glob names, by column
// name across files: the archive's schema evolves (base_fee_per_gas from
// London on), and without union_by_name DuckDB takes the first file's
// columns for all of them, where ethstream reads the missing column as null.
func duckParquet(glob string) string {
	return fmt.Sprintf("read_parquet('%s', union_by_name = true)", glob)
}

// shapeTable is shape name's table under dir.
func shapeTable(dir, name string) string { return filepath.Join(dir, name, "table") }

// ShapeNames lists the shapes' names (for the flag's help).
func ShapeNames() []string {
	var ns []string
	for _, s := range benchShapes {
		ns = append(ns, s.Name)
	}
	return ns
}

// CheckShapes refuses an unknown shape name before anything runs.
func CheckShapes(names []string) error {
	for _, n := range names {
		if n != "all" && !slices.ContainsFunc(benchShapes, func(s BenchShape) bool { return s.Name == n }) {
			return errcode.New(errcode.InvalidArgument, "", "pass one of: all, "+strings.Join(ShapeNames(), ", "),
				"--shape %q is not a bench shape", n)
		}
	}
	return nil
}

// ShapeResult is one shape's run beside DuckDB's (milliseconds).
type ShapeResult struct {
	Name        string `json:"name"`
	What        string `json:"what"`
	Ms          int64  `json:"ms"`
	CPUMs       int64  `json:"cpuMs"`
	InputRows   int64  `json:"inputRows"`
	DuckDBMs    int64  `json:"duckdbMs,omitempty"`
	DuckDBCPUMs int64  `json:"duckdbCpuMs,omitempty"`
	DuckDBOut   string `json:"duckdbOutput,omitempty"`
	// PeakRSSBytes is the peak RSS of the shape's run: of its leg's
	// process, or of the bench's with no leg command (the bench's own heap
	// then included); DuckDBPeakRSSBytes DuckDB's process's.
	PeakRSSBytes       int64 `json:"peakRssBytes,omitempty"`
	DuckDBPeakRSSBytes int64 `json:"duckdbPeakRssBytes,omitempty"`
}

func init() {
	benchStages = append(benchStages, benchStage{name: "query shapes (--shape)", run: benchShapesStage})
}

// selectedShapes returns the shapes o names, in benchShapes' order.
func selectedShapes(names []string) []BenchShape {
	var out []BenchShape
	for _, s := range benchShapes {
		if slices.Contains(names, "all") || slices.Contains(names, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// benchShapesStage runs every selected shape, then DuckDB's job for it.
func benchShapesStage(ctx context.Context, b *benchRun, res *BenchResult) error {
	shapes := selectedShapes(b.o.Shapes)
	if len(shapes) == 0 {
		return nil
	}
	dir := filepath.Join(b.o.WorkDir, "shapes")
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	defer os.RemoveAll(dir)
	blocks := filepath.Join(b.env.ArchiveRoot, "v1.0", "eth", "blocks")
	in := shapeInputs{blocks: pipeline.SourceSpec{Name: ArchiveSource, Format: "s3archive",
		URI: fmt.Sprintf("file://%s?maxFilesPerTrigger=%d", filepath.ToSlash(blocks), b.o.Preset.MaxFilesPerTrigger)}}
	done := map[string]bool{}
	var run func(s BenchShape, timed bool) error
	run = func(s BenchShape, timed bool) error {
		if s.Needs != "" && !done[s.Needs] {
			for _, n := range benchShapes {
				if n.Name == s.Needs {
					if err := run(n, false); err != nil {
						return err
					}
				}
			}
		}
		src := in.blocks
		if s.Input == shapeTransactions {
			if err := in.transactions(ctx, b.o); err != nil {
				return err
			}
			src = in.tx
		}
		fmt.Fprintf(b.o.Log, "shape %s ...\n", s.Name)
		// The shape's run is a leg (bench_leg.go): in a process of its own
		// when the bench has the command, so its CPU and peak RSS are its
		// own and not those of the stages before it.
		sd := filepath.Join(dir, s.Name)
		leg, rec, err := b.runLeg(ctx, LegSpec{Checkpoint: filepath.Join(sd, "checkpoint"), Table: shapeTable(dir, s.Name),
			LocalDir: filepath.Join(sd, "state-cache"), Sources: []pipeline.SourceSpec{src}, Conf: clone(b.conf),
			Shape: s.Name, ShapeDir: dir})
		if err != nil {
			return fmt.Errorf("shape %s: %w", s.Name, err)
		}
		done[s.Name] = true
		if !timed {
			return nil
		}
		r := ShapeResult{Name: s.Name, What: s.What, Ms: leg.WallMs, CPUMs: leg.CPUMs, PeakRSSBytes: leg.PeakRSSBytes}
		for _, p := range rec.events {
			r.InputRows += p.NumInputRows
		}
		if b.o.DuckDB != "" {
			q := strings.NewReplacer("{blocks}", duckParquet(filepath.Join(blocks, "*", "*.parquet")),
				"{transactions}", fmt.Sprintf("read_parquet('%s')", in.txGlob), "{dir}", dir).Replace(s.DuckDB)
			out := filepath.Join(dir, s.Name+"-duckdb.parquet")
			fmt.Fprintf(b.o.Log, "duckdb, shape %s ...\n", s.Name)
			p, err := duckProcess(ctx, b.o.DuckDB, "copysql", out, q)
			if err != nil {
				return err
			}
			r.DuckDBMs, r.DuckDBCPUMs, r.DuckDBOut, r.DuckDBPeakRSSBytes = p.wallMs, p.cpuMs, p.out, p.peakRSS
			if res.Host.DuckDBThreads == 0 { // --stages-only: no yardstick ran
				res.Host.DuckDBThreads = duckThreads(p.out)
			}
		}
		res.Shapes = append(res.Shapes, r)
		return nil
	}
	for _, s := range shapes {
		if err := run(s, true); err != nil {
			return err
		}
	}
	res.Targets = append(res.Targets, shapeTargets(res.Shapes)...)
	return nil
}

// shapeTargets judges each shape's wall ratio against DuckDB's.
func shapeTargets(rs []ShapeResult) []Target {
	var ts []Target
	for _, r := range rs {
		name := fmt.Sprintf("shape %s: ethstream / DuckDB, wall", r.Name)
		if r.DuckDBOut == "" {
			ts = append(ts, notMeasured(name, fmt.Sprintf("<= %.1fx", ShapeLimit), "needs --duckdb"))
			continue
		}
		w := ratio(r.Ms, r.DuckDBMs)
		ts = append(ts, atMost(name, fmt.Sprintf("<= %.1fx", ShapeLimit), w, ShapeLimit, fmt.Sprintf("%.2fx", w)))
	}
	return ts
}

// printShapes prints each shape's figures beside DuckDB's: wall and CPU
// time, cores busy, rows read per second and peak RSS of each process.
func printShapes(w io.Writer, rs []ShapeResult) {
	if len(rs) == 0 {
		return
	}
	mb := func(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
	fmt.Fprintf(w, "\n| shape | what | input rows | ethstream | cores busy | rows/s | peak RSS | DuckDB (its process) | cores busy | peak RSS | wall; CPU ratio |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		duck, ratios, dc, drss := "-", "-", "-", "-"
		if r.DuckDBOut != "" {
			duck = fmt.Sprintf("%.1f s, %.1f CPU-s", float64(r.DuckDBMs)/1000, float64(r.DuckDBCPUMs)/1000)
			dc = fmt.Sprintf("%.2f", ratio(r.DuckDBCPUMs, r.DuckDBMs))
			ratios = fmt.Sprintf("%.2fx; %.2fx", ratio(r.Ms, r.DuckDBMs), ratio(r.CPUMs, r.DuckDBCPUMs))
			drss = mb(r.DuckDBPeakRSSBytes)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.1f s, %.1f CPU-s | %.2f | %.0f | %s | %s | %s | %s | %s |\n", r.Name, r.What, r.InputRows,
			float64(r.Ms)/1000, float64(r.CPUMs)/1000, ratio(r.CPUMs, r.Ms), float64(r.InputRows)/(float64(max(r.Ms, 1))/1000),
			mb(r.PeakRSSBytes), duck, dc, drss, ratios)
	}
}
