package demo

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// TxQuery is the transactions lifecycle's query: fees paid per hour per
// transaction type, in gwei (a double: an hour's fees in wei overflow a
// long), with the transaction count. FROM blocks is the view over every
// --source (pipeline.FromAll), here transaction rows.
const TxQuery = "SELECT window(block_timestamp, '1 hour') AS window, transaction_type, count(*) AS txs, " +
	"sum(receipt_gas_used * receipt_effective_gas_price / 1000000000) AS fees_gwei " +
	"FROM blocks GROUP BY window(block_timestamp, '1 hour'), transaction_type"

// TxWatermark is the query's withWatermark.
const TxWatermark = "block_timestamp, 2 hours"

// TxOptions configure RunTransactions, the demo's lifecycle on TxQuery.
type TxOptions struct {
	WorkDir    string // archive, checkpoint, table, progress
	ResultsDir string // batches.csv, sources.csv, verification.csv, summary.txt
	Seed       int64
	// Blocks is the archive: the last Blocks blocks of history with every
	// table (default 300, some 57,000 transactions: bodies cost ~20 µs a
	// transaction, so a whole day's 1.4 million would dwarf the run).
	Blocks int
	// Live batches per phase and blocks per batch, as Options.
	AddLiveBatches, RetireBatches, ShrinkBatches, BlocksPerBatch int
	StatePartitions, ShrinkTo                                    int
	TriggerInterval                                              time.Duration
	Out                                                          io.Writer
	Logger                                                       *slog.Logger
}

func (o *TxOptions) defaults() {
	o.Seed = cmp.Or(o.Seed, 1)
	o.Blocks = cmp.Or(o.Blocks, 300)
	o.AddLiveBatches = cmp.Or(o.AddLiveBatches, 6)
	o.RetireBatches = cmp.Or(o.RetireBatches, 4)
	o.ShrinkBatches = cmp.Or(o.ShrinkBatches, 4)
	o.BlocksPerBatch = cmp.Or(o.BlocksPerBatch, 10)
	o.StatePartitions = cmp.Or(o.StatePartitions, 200)
	o.ShrinkTo = cmp.Or(o.ShrinkTo, 8)
	o.TriggerInterval = cmp.Or(o.TriggerInterval, 50*time.Millisecond)
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// TxReport is the outcome of RunTransactions.
type TxReport struct {
	Phases   []PhaseResult
	Checks   []Check
	Manifest *archivegen.Manifest
}

// Passed reports whether every check held.
func (r *TxReport) Passed() bool {
	for _, c := range r.Checks {
		if !c.Pass && !c.Figure {
			return false
		}
	}
	return len(r.Checks) > 0
}

// RunTransactions runs the lifecycle on TxQuery over the transactions
// table: backfill from a file:// archive with every table, add the live
// source (ethrpc table=transactions) on the same checkpoint, retire the
// archive, shrink the state from StatePartitions to ShrinkTo partitions;
// then checks the table against an independent recount (the archive's
// Parquet files read with parquet-go, the live blocks' receipts through
// go-ethereum's client) and writes the results.
func RunTransactions(ctx context.Context, o TxOptions) (*TxReport, error) {
	o.defaults()
	// Absolute: the archive source's file:// location must be (the
	// default work directory, "work", is relative).
	archive, err := filepath.Abs(filepath.Join(o.WorkDir, "tx-archive"))
	if err != nil {
		return nil, err
	}
	preset := chain.LastBlocksPreset(o.Blocks)
	m, err := archivegen.ReadManifest(archive)
	if err != nil || m.Preset != preset.Name || m.Seed != o.Seed || len(m.Tables) != len(ethtables.Names) {
		if err := os.RemoveAll(archive); err != nil {
			return nil, err
		}
		if m, err = archivegen.Generate(ctx, archivegen.Options{Out: archive, Preset: preset, Seed: o.Seed, Tables: ethtables.Names}); err != nil {
			return nil, err
		}
	}
	node, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: o.Seed, Addr: "127.0.0.1:0", Manual: true,
		InitialBlocks: o.BlocksPerBatch * (o.AddLiveBatches + o.RetireBatches + o.ShrinkBatches)})
	if err != nil {
		return nil, err
	}
	defer node.Close()
	dirs := map[string]string{"ck": "tx-checkpoint", "table": "tx-table", "cache": "tx-state-cache", "progress": "tx-progress"}
	for k, d := range dirs {
		dirs[k] = filepath.Join(o.WorkDir, d)
		if err := os.RemoveAll(dirs[k]); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dirs["progress"], 0o755); err != nil {
		return nil, err
	}
	s3src := pipeline.SourceSpec{Name: ArchiveSource, Format: "s3archive",
		URI: "file://" + filepath.ToSlash(archive) + "/v1.0/eth/transactions?maxFilesPerTrigger=1"}
	liveSrc := pipeline.SourceSpec{Name: LiveSource, Format: "ethrpc", URI: fmt.Sprintf(
		"%s?table=transactions&start_block=%d&start_parent_hash=%s&maxBlocksPerTrigger=%d", node.URL(), m.LastBlock+1, m.LastHash, o.BlocksPerBatch)}
	conf := EvolutionConf(o.StatePartitions)
	live := engine.Trigger{Kind: engine.ProcessingTime, Interval: o.TriggerInterval}
	rep := &TxReport{Manifest: m}
	run := func(name string, sources []pipeline.SourceSpec, conf map[string]string, trig engine.Trigger, maxBatches int) error {
		cfg := pipeline.Config{Checkpoint: dirs["ck"], Table: dirs["table"], LocalDir: dirs["cache"], Sources: sources, Conf: conf,
			Trigger: trig, MaxBatches: maxBatches, Query: TxQuery, WithWatermark: TxWatermark, Logger: o.Logger.With("phase", name),
			ProgressFile: filepath.Join(dirs["progress"], name+".jsonl")}
		res := PhaseResult{Name: name, Conf: conf, Trigger: trigString(trig, maxBatches), Progress: cfg.ProgressFile}
		for _, s := range sources {
			res.Sources = append(res.Sources, s.Name)
		}
		fmt.Fprintf(o.Out, "==> %s\n%s", name, commandLines("    ethstream", cfg.Args(), summaryWidth))
		t0 := time.Now()
		_, res.Err = pipeline.Run(ctx, cfg)
		res.Duration = time.Since(t0)
		rep.Phases = append(rep.Phases, res)
		if res.Err != nil {
			return fmt.Errorf("phase %s: %w", name, res.Err)
		}
		fmt.Fprintf(o.Out, "    %s done in %s\n", name, res.Duration.Round(time.Millisecond))
		return nil
	}
	shrink := clone(conf)
	shrink["spark.sql.streaming.stateStore.partitions"] = strconv.Itoa(o.ShrinkTo)
	for _, p := range []struct {
		name    string
		sources []pipeline.SourceSpec
		conf    map[string]string
		trig    engine.Trigger
		batches int
	}{
		{PhaseBackfill, []pipeline.SourceSpec{s3src}, conf, engine.Trigger{Kind: engine.AvailableNow}, 0},
		{PhaseAddLive, []pipeline.SourceSpec{s3src, liveSrc}, conf, live, o.AddLiveBatches},
		{PhaseRetireArchive, []pipeline.SourceSpec{liveSrc}, conf, live, o.RetireBatches},
		{PhaseShrinkState, []pipeline.SourceSpec{liveSrc}, shrink, live, o.ShrinkBatches},
	} {
		if err := run(p.name, p.sources, p.conf, p.trig, p.batches); err != nil {
			return rep, err
		}
	}
	return rep, txReport(ctx, o, node, dirs, rep)
}

// txReport flattens the progress, checks the table and writes the results.
func txReport(ctx context.Context, o TxOptions, node *ethnode.Node, dirs map[string]string, rep *TxReport) error {
	if err := prepareResults(o.ResultsDir); err != nil {
		return err
	}
	var files []engine.PhaseFile
	for _, p := range rep.Phases {
		files = append(files, engine.PhaseFile{Phase: p.Name, Path: p.Progress})
	}
	if err := engine.FlattenProgress(vfs.Default, o.ResultsDir, files); err != nil {
		return err
	}
	batches, err := ReadBatches(filepath.Join(o.ResultsDir, "batches.csv"))
	if err != nil {
		return err
	}
	sources, err := ReadSources(filepath.Join(o.ResultsDir, "sources.csv"))
	if err != nil {
		return err
	}
	rep.Checks, err = txChecks(ctx, o, node, dirs["table"], rep.Manifest, batches, sources)
	if err != nil {
		return err
	}
	if err := WriteChecks(filepath.Join(o.ResultsDir, "verification.csv"), rep.Checks); err != nil {
		return err
	}
	var sum strings.Builder
	fmt.Fprintf(&sum, "transactions lifecycle: %s\narchive: blocks %d-%d, %d transactions\n\n", TxQuery, rep.Manifest.FirstBlock,
		rep.Manifest.LastBlock, rep.Manifest.Tables[ethtables.Transactions].Rows)
	fmt.Fprintf(&sum, "%-16s %-24s %-8s %-8s\n", "phase", "sources", "batches", "rows in")
	for _, p := range rep.Phases {
		first, last := phaseSpan(batches, p.Name)
		var rows int64
		for _, b := range batches {
			if b.Phase == p.Name {
				rows += b.NumInputRows
			}
		}
		fmt.Fprintf(&sum, "%-16s %-24s %-8s %-8d\n", p.Name, strings.Join(p.Sources, ","), fmt.Sprintf("%d-%d", first, last), rows)
	}
	sum.WriteString("\n")
	for _, c := range rep.Checks {
		fmt.Fprintf(&sum, "%-7s %s: %s\n", c.Result(), c.Name, c.Actual)
	}
	fmt.Fprint(o.Out, sum.String())
	return writeFile(filepath.Join(o.ResultsDir, "summary.txt"), func(w io.Writer) error {
		_, err := io.WriteString(w, sum.String())
		return err
	})
}

// txGroup is one (hour, transaction type) of the query's answer.
type txGroup struct {
	hour int64 // window start, µs
	typ  int64
}

type txAgg struct {
	txs  int64
	fees float64
}

// txChecks proves the lifecycle's claims from its progress records and
// the table: the phases' batches, the archive held after the live source
// joined, the shrink to ShrinkTo partitions, and the table equal to a
// recount of the archive's transactions plus the live blocks'.
func txChecks(ctx context.Context, o TxOptions, node *ethnode.Node, table string, m *archivegen.Manifest, batches []BatchRecord, sources []SourceRecord) ([]Check, error) {
	var checks []Check
	var archiveRows int64
	for _, s := range sources {
		if s.SourceName == ArchiveSource {
			archiveRows += s.NumInputRows
		}
	}
	checks = append(checks, check("T1. archive rows read = the archive's transactions", m.Tables[ethtables.Transactions].Rows, archiveRows))
	var lastLive liveOffset
	for _, s := range sources {
		if s.SourceName == LiveSource {
			if off, ok := parseLive(s.EndOffset); ok && off.Block > lastLive.Block {
				lastLive = off
			}
		}
	}
	checks = append(checks, check("T2. live blocks read", int64(o.BlocksPerBatch*(o.AddLiveBatches+o.RetireBatches+o.ShrinkBatches)), int64(lastLive.Block-m.LastBlock)))
	var parts int64
	for _, b := range batches {
		if b.Phase == PhaseShrinkState && b.Kind == "data" {
			parts = b.StatePartitions
		}
	}
	checks = append(checks, check("T3. state partitions after the shrink", int64(o.ShrinkTo), parts))
	want, err := txRecount(ctx, m, filepath.Join(o.WorkDir, "tx-archive"), node.URL(), m.LastBlock+1, lastLive.Block)
	if err != nil {
		return nil, err
	}
	got, err := txTable(ctx, table)
	if err != nil {
		return nil, err
	}
	var total int64
	bad := 0
	for g, w := range want {
		total += w.txs
		a, ok := got[g]
		if !ok || a.txs != w.txs || math.Abs(a.fees-w.fees) > 1e-9*math.Abs(w.fees) {
			bad++
		}
	}
	if len(got) != len(want) {
		bad += abs(len(got) - len(want))
	}
	checks = append(checks, check("T4. table (hour, type) groups differing from the recount", 0, int64(bad)))
	checks = append(checks, figure("T4. transactions in the table", total))
	return checks, nil
}

func abs(x int) int { return max(x, -x) }

// txTable reads the table's groups.
func txTable(ctx context.Context, path string) (map[txGroup]txAgg, error) {
	snap, err := tableSnapshot(ctx, path, -1)
	if err != nil {
		return nil, err
	}
	out := map[txGroup]txAgg{}
	err = snap.Scan(ctx, func(b *stream.Batch) error {
		ws, typ, txs, fees := b.Column(delta.KeyWindowStart), b.Column("transaction_type"), b.Column("txs"), b.Column("fees_gwei")
		if ws == nil || typ == nil || txs == nil || fees == nil {
			return fmt.Errorf("the table is not TxQuery's (columns %v)", b.Columns)
		}
		for i := range b.Len {
			out[txGroup{ws.Int64s[i], typ.Int64s[i]}] = txAgg{txs.Int64s[i], fees.Float64s[i]}
		}
		return nil
	})
	return out, err
}

// txRecount counts the query's answer independently of the engine: the
// archive's transactions files read with parquet-go, the live blocks
// first..last with go-ethereum's client (receipts and blocks).
func txRecount(ctx context.Context, m *archivegen.Manifest, root, nodeURL string, first, last uint64) (map[txGroup]txAgg, error) {
	out := map[txGroup]txAgg{}
	add := func(ts time.Time, typ int64, gas, price uint64) {
		g := txGroup{ts.Truncate(time.Hour).UnixMicro(), typ}
		a := out[g]
		a.txs++
		a.fees += float64(int64(gas)*int64(price)) / 1e9
		out[g] = a
	}
	type row struct {
		TS    int64 `parquet:"block_timestamp"`
		Type  int64 `parquet:"transaction_type"`
		Gas   int64 `parquet:"receipt_gas_used"`
		Price int64 `parquet:"receipt_effective_gas_price"`
	}
	for _, f := range m.Tables[ethtables.Transactions].Files {
		rows, err := parquet.ReadFile[row](filepath.Join(root, filepath.FromSlash(f.Key)))
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			add(time.UnixMicro(r.TS).UTC(), r.Type, uint64(r.Gas), uint64(r.Price))
		}
	}
	ec, err := ethclient.DialContext(ctx, nodeURL)
	if err != nil {
		return nil, err
	}
	defer ec.Close()
	for n := first; n <= last && first <= last; n++ {
		blk, err := ec.BlockByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			return nil, err
		}
		rs, err := ec.BlockReceipts(ctx, rpc.BlockNumberOrHashWithHash(blk.Hash(), false))
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			add(time.Unix(int64(blk.Time()), 0).UTC(), int64(r.Type), r.GasUsed, r.EffectiveGasPrice.Uint64())
		}
	}
	return out, nil
}
