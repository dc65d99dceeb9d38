package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/demo"
	"github.com/ethstream/ethstream/errcode"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	var workdir, preset, out, duck string
	var days, live int
	var keys bool
	var keysFiles, rounds int
	var shapes, atScale []string
	var stagesOnly bool
	var seed int64
	var fresh freshnessFlags
	c := &cobra.Command{
		Use:   "bench [--preset demo|seed] [--days N] [--live-batches N] [--workdir DIR] [--out FILE] [--duckdb BIN] [--keys-per-block [--keys-files-per-trigger N]] [--rounds N] [--shape NAME ...] [--state-at-scale OPERATOR ...] [--stages-only] [--freshness [--freshness-query NAME ...] [--blocks N] [--rate R] [--endpoint ws://HOST:PORT | --poll DUR]]",
		Short: "Measure the targets of docs/contracts.md end to end: backfill, restart, live latency, repartition, RSS",
		Long: `bench generates (or reuses) the preset's archive in the work directory, serves it over S3,
and runs the backfill (availableNow, 200 state partitions; each backfill in a process of its own,
so that its peak RSS is its own), then in this process a restart with the
live source at 200 partitions, and a restart that shrinks the state to 8 partitions followed by
live batches. The timed backfill reads the archive from this binary's serve-s3, run as a
process of its own, so that its CPU time is the engine's alone (as against S3); the endpoint's
CPU time is printed beside it. It prints a table against the targets and, with --out, writes
the figures as JSON. The seed preset's archive takes minutes to generate and about 9 GB of
disk the first time.

With --duckdb PATH (the scripts/duckref binary, built in its own module: cd scripts/duckref &&
go build -o /tmp/duckref .), bench also runs the backfill from file:// on a checkpoint of its
own, then DuckDB doing the same job (reading the same files, grouping, and writing the grouped
result to a Parquet file: COPY ... TO ... (FORMAT parquet)) and its plain GROUP BY, each as its
own process, and prints the ratios of wall time and of CPU time (user + system: this process
during a backfill, the DuckDB process for DuckDB). With --rounds N those backfill legs run N
times, alternating, and every figure (and the target judged on it) is the median of its N runs.

With --keys-per-block, bench also runs a query whose state holds one key per block (GROUP BY a
3650-day window and the block hash, a 3650-day watermark, append mode) through the backfill, then
restarts it at 8 state partitions, and reports its peak RSS, its state commits and the
repartition's keys before and after.

With --shape NAME (repeatable, or all), bench also times each query shape (stateless, burned-fees,
dedup, delta-to-delta, join, session, transactions) over the archive from file:// against DuckDB's
batch job over the same files (with --duckdb), and judges ethstream's wall time against DuckDB's
(<= 1.5x). The transactions shape reads a one-day archive with its transactions table (about
1.4 million transactions), generated into the work directory the first time.

With --state-at-scale OPERATOR (join, dedup, or all), bench also runs that operator's state at a
key per block (a join of every block with its parent, no watermark; dropDuplicates(hash)) through
the backfill, repartitions a hard-linked copy of its checkpoint to 8 partitions offline (as
ethstream checkpoint repartition does), then restarts it at 8 state partitions, and judges the peak
RSS (<= 1.5 GB) and the rows of both repartitions (none lost: the same count and the same digest of
every key and value as the backfill left). With --stages-only, bench skips its backfill,
yardstick and live legs and runs only these stages. Beside the
figures it prints each backfill step's wall, CPU time and cores busy, the rounds' spread, and
the host's CPUs, load average and DuckDB's thread count.

Last it prints every target of docs/contracts.md (Targets) with its measured value and
pass, fail or "not measured", and exits 1 with TARGET_MISSED if any target failed (after
the tables and the --out JSON are written; "not measured" is not a failure).

With --freshness, bench instead measures head-to-table freshness: the reference query (8 state
partitions) under --trigger real-time follows the in-repo node, mining --rate blocks per second
and announcing each by newHeads over ws, or with --endpoint an external node (geth --dev --ws);
per block, the commit of its batch minus the node's announcement (for an external node, the
arrival of this process's own newHeads notification). It prints p50, p99 and max, RSS after the
first batch and at the end, the table's and the checkpoint's file counts, and each batch phase's
median, then its targets (p50, p99, RSS flat, file counts bounded: judged from the run's
midpoint to its end once the midpoint is two retentions in), with the same exit status;
--out writes them as JSON. With --freshness-query NAME (repeatable, or all) it follows the head
with other queries in turn, each judged against the same targets: where (the reference query
behind a WHERE), two-stateful (dropDuplicatesWithinWatermark(hash), then the aggregation) and
transactions (ethrpc table=transactions, fees per hour per transaction type).`,
		Example: `  ethstream bench --days 7 --out /tmp/bench.json
  ethstream bench --preset seed --live-batches 50
  ethstream bench --freshness --blocks 10000 --rate 10
  ethstream bench --freshness --endpoint ws://127.0.0.1:8546 --blocks 120`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rounds < 1 {
				return usage(errcode.New(errcode.InvalidArgument, "", "pass --rounds 1 or more", "--rounds %d: a bench runs its backfill legs at least once", rounds))
			}
			if fresh.on {
				return fresh.run(cmd, workdir, seed, out)
			}
			p, err := presetFromFlags(preset, days)
			if err != nil {
				return err
			}
			if err := demo.CheckShapes(shapes); err != nil {
				return usage(err)
			}
			if err := demo.CheckAtScale(atScale); err != nil {
				return usage(err)
			}
			// The S3 backfill reads from this binary's serve-s3 in a process
			// of its own, so its CPU is the engine's alone; each backfill leg
			// runs as this binary's bench-leg, so its peak RSS is its own.
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find this executable for the S3 endpoint's process: %w", err)
			}
			res, err := demo.Bench(cmd.Context(), demo.BenchOptions{WorkDir: workdir, Preset: p, Seed: seed,
				LiveBatches: live, DuckDB: duck, KeysPerBlock: keys, KeysFilesPerTrigger: keysFiles, Rounds: rounds,
				ServeS3: []string{exe, "serve-s3"}, Leg: []string{exe, benchLegCmd}, Shapes: shapes, StateAtScale: atScale, StagesOnly: stagesOnly, Out: cmd.OutOrStdout(), Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			if out != "" {
				if err := demo.WriteBenchJSON(out, res); err != nil {
					return err
				}
			}
			return demo.MissedTargets(res.Targets)
		},
	}
	c.Flags().StringVar(&workdir, "workdir", "work/bench", "work directory (the archive is cached here)")
	c.Flags().StringVar(&preset, "preset", "demo", "archive preset: demo | seed")
	c.Flags().IntVar(&days, "days", 0, "the last N days instead of the preset")
	c.Flags().IntVar(&live, "live-batches", 20, "live batches measured at each partition count")
	c.Flags().Int64Var(&seed, "seed", chain.DefaultSeed, "chain seed")
	c.Flags().StringVar(&out, "out", "", "write the figures as JSON to FILE")
	c.Flags().StringVar(&duck, "duckdb", "", "path of the scripts/duckref binary: also run the file:// backfill and DuckDB's GROUP BY over the same files, and print the ratios")
	c.Flags().BoolVar(&keys, "keys-per-block", false, "also run the state at one key per block (26M keys on the seed preset) and its repartition 200 -> 8")
	c.Flags().IntVar(&keysFiles, "keys-files-per-trigger", 40, "maxFilesPerTrigger of the --keys-per-block run")
	c.Flags().IntVar(&rounds, "rounds", 1, "run the backfill legs (S3, and with --duckdb the file:// backfill and DuckDB's queries) N times, alternating, and judge the targets on each figure's median")
	c.Flags().StringSliceVar(&shapes, "shape", nil, "also measure query shape NAME against DuckDB's batch job over the same files (repeatable; all, "+strings.Join(demo.ShapeNames(), ", ")+")")
	c.Flags().StringSliceVar(&atScale, "state-at-scale", nil, "also run OPERATOR's state at a key per block (26M keys on the seed preset) and its repartition 200 -> 8 (repeatable; all, "+strings.Join(demo.AtScaleOperators, ", ")+")")
	c.Flags().BoolVar(&stagesOnly, "stages-only", false, "skip the backfill, yardstick and live legs: run only what --shape, --keys-per-block and --state-at-scale ask for")
	fresh.register(c)
	return c
}

// benchLegCmd is the hidden command that runs one backfill leg of bench in
// a process of its own (demo.RunLeg): its spec as JSON on standard input,
// its figures as JSON on standard output.
const benchLegCmd = "bench-leg"

func newBenchLegCmd() *cobra.Command {
	return &cobra.Command{Use: benchLegCmd, Hidden: true, Args: cobra.NoArgs,
		Short: "Run one backfill leg of bench (its spec as JSON on stdin) and print its figures as JSON",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return demo.RunLeg(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
		}}
}

func init() {
	rootCmd.AddCommand(newBenchCmd())
	rootCmd.AddCommand(newBenchLegCmd())
}
