package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/interval"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/stream"
)

// FreshnessOptions configures BenchFreshness.
type FreshnessOptions struct {
	WorkDir string
	Seed    int64
	Blocks  int     // blocks measured (default 300)
	Rate    float64 // in-repo node: blocks per second (default 10)
	// Endpoint is the ws:// URL of an external node (geth --dev); "" runs
	// the in-repo node at Rate.
	Endpoint string
	// Poll, if set, runs the way a live query ran before head following:
	// the in-repo node over http and trigger processingTime=Poll (the
	// "before" of the figures).
	Poll time.Duration
	// Query names the query run (bench_freshness_queries.go; "" = the
	// reference query).
	Query string
	Log   io.Writer
}

// FreshnessResult is one freshness run: per block, the wall time from the
// node announcing it (the in-repo node's record; for an external node, the
// arrival of its newHeads notification at this process) to the commit of
// the batch holding it (the progress event, which follows the Delta commit
// and the checkpoint's commit file, so the figure is an upper bound).
type FreshnessResult struct {
	// Query is the FreshnessQuery's name.
	Query       string  `json:"query"`
	Endpoint    string  `json:"endpoint"`
	Trigger     string  `json:"trigger"`
	Blocks      int     `json:"blocks"`
	Rate        float64 `json:"blocksPerSecond,omitempty"`
	Batches     int     `json:"batches"`
	P50Ms       float64 `json:"freshnessP50Ms"`
	P99Ms       float64 `json:"freshnessP99Ms"`
	MaxMs       float64 `json:"freshnessMaxMs"`
	RSSStart    int64   `json:"rssStartBytes"`
	RSSEnd      int64   `json:"rssEndBytes"`
	TableFiles  int     `json:"tableDataFiles"`    // parquet files on disk outside _delta_log
	LogFiles    int     `json:"tableLogFiles"`     // entries of _delta_log
	CkptFiles   int     `json:"checkpointFiles"`   // files under the query's checkpoint
	Resubscribe string  `json:"subscribes"`        // the source's subscription count
	Notified    string  `json:"headNotifications"` // notifications the source received
	// PhaseMedianMs and PhaseP99Ms are the median and p99 of each
	// durationMs key over the measured batches: where the tail goes.
	PhaseMedianMs map[string]float64 `json:"phaseMedianMs"`
	PhaseP99Ms    map[string]float64 `json:"phaseP99Ms"`
	// Mid is the file counts when half the blocks were measured: the end's
	// counts are judged against it (freshnessTargets).
	Mid fileCounts `json:"midpoint"`
	// Targets are the head-to-table targets of docs/contracts.md, judged.
	Targets []Target `json:"targets"`
}

// Freshness table properties: a short log retention, so a long live run's
// _delta_log stays bounded (Delta's default keeps 30 days of entries).
var freshnessTableProps = map[string]string{
	"delta.logRetentionDuration":         "interval " + interval.Format(freshnessRetention),
	"delta.deletedFileRetentionDuration": "interval " + interval.Format(freshnessRetention),
}

// BenchFreshness runs the reference query under trigger realTime against a
// node producing blocks, and measures each block's freshness.
func BenchFreshness(ctx context.Context, o FreshnessOptions) (*FreshnessResult, error) {
	if o.Blocks <= 0 {
		o.Blocks = 300
	}
	if o.Rate <= 0 {
		o.Rate = 10
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	q := freshnessQuery(o.Query)
	dir := filepath.Join(o.WorkDir, "freshness")
	for _, d := range []string{"checkpoint", "table", "state-cache"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f, err := newFreshnessFeed(ctx, o, dir, q.Table)
	if err != nil {
		return nil, err
	}
	defer f.close()
	res := &FreshnessResult{Query: q.Name, Endpoint: f.describe, Blocks: o.Blocks}
	if o.Endpoint == "" {
		res.Rate = o.Rate
	}
	rec := &freshRecorder{feed: f, want: o.Blocks, done: cancel, log: o.Log, dir: dir}
	trig := engine.Trigger{Kind: engine.RealTime}
	if o.Poll > 0 {
		trig = engine.Trigger{Kind: engine.ProcessingTime, Interval: o.Poll}
	}
	res.Trigger = pipeline.TriggerString(trig)
	fmt.Fprintf(o.Log, "freshness: %d blocks from %s, trigger %s, query %s ...\n", o.Blocks, f.describe, res.Trigger, q.Name)
	cfg := pipeline.Config{Checkpoint: filepath.Join(dir, "checkpoint"), Table: filepath.Join(dir, "table"),
		LocalDir: filepath.Join(dir, "state-cache"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sources: []pipeline.SourceSpec{f.source}, Conf: EvolutionConf(8), Trigger: trig,
		TableProperties: freshnessTableProps, Listeners: []engine.Listener{rec}}
	q.Config(&cfg)
	_, err = pipeline.Run(ctx, cfg)
	if err != nil && !errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("freshness run: %w", err)
	}
	rec.summarise(res)
	if res.Blocks < o.Blocks {
		return nil, fmt.Errorf("freshness run ended after %d of %d blocks", res.Blocks, o.Blocks)
	}
	res.RSSEnd = currentRSS()
	res.TableFiles, res.LogFiles = countTable(filepath.Join(dir, "table"))
	res.CkptFiles = countFiles(filepath.Join(dir, "checkpoint"))
	res.Targets = freshnessTargets(res)
	return res, nil
}

// freshnessFeed is the node the run follows and when it announced each block.
type freshnessFeed struct {
	node     *ethnode.Node // in-repo node, or nil
	describe string
	source   pipeline.SourceSpec
	// external node: arrival time of each notified head, by number
	mu      sync.Mutex
	arrived map[uint64]time.Time
	sub     *rpc.ClientSubscription
	client  *rpc.Client
}

// newFreshnessFeed starts the node the run follows (or subscribes to the
// external one) and the source reading table from it ("" = blocks). The
// in-repo node continues an archive: with a table, a short one holding it
// (its bodies change the blocks' hashes).
func newFreshnessFeed(ctx context.Context, o FreshnessOptions, dir, table string) (*freshnessFeed, error) {
	param := ""
	if table != "" {
		param = "table=" + table + "&"
	}
	if o.Endpoint != "" {
		return externalFeed(ctx, o.Endpoint, param)
	}
	root, preset, gen := filepath.Join(dir, "archive"), chain.LastDaysPreset(1), archivegen.Options{Seed: o.Seed}
	if table != "" {
		root, preset, gen.Tables = filepath.Join(dir, "archive-"+table), chain.LastBlocksPreset(300), []string{table}
	}
	m, err := archivegen.ReadManifest(root)
	if err != nil || m.Seed != o.Seed || m.Preset != preset.Name || table != "" && m.Tables[table].Rows == 0 {
		if err := os.RemoveAll(root); err != nil {
			return nil, err
		}
		gen.Out, gen.Preset = root, preset
		if m, err = archivegen.Generate(ctx, gen); err != nil {
			return nil, err
		}
	}
	n, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: o.Seed, Addr: "127.0.0.1:0",
		BlockInterval: chain.SlotSeconds * time.Second, Speed: chain.SlotSeconds * o.Rate, CachedBlocks: 64})
	if err != nil {
		return nil, err
	}
	f := &freshnessFeed{node: n, describe: fmt.Sprintf("in-repo node at %g blocks/s", o.Rate)}
	url := n.WebsocketURL()
	if o.Poll > 0 {
		url, f.describe = n.URL(), f.describe+" over http"
	}
	f.source = pipeline.SourceSpec{Name: LiveSource, Format: "ethrpc", URI: fmt.Sprintf(
		"%s?%smaxBlocksPerTrigger=20&start_block=%d&confirmations=0&start_parent_hash=%s",
		url, param, m.LastBlock+1, m.LastHash)}
	return f, nil
}

// externalFeed subscribes to newHeads itself, to time each head's arrival
// as the source sees it; the run starts at the node's head.
func externalFeed(ctx context.Context, endpoint, param string) (*freshnessFeed, error) {
	c, err := rpc.DialContext(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	f := &freshnessFeed{describe: endpoint, client: c, arrived: map[uint64]time.Time{}}
	ch := make(chan struct {
		Number hexutil.Uint64 `json:"number"`
	}, 256)
	if f.sub, err = c.EthSubscribe(ctx, ch, "newHeads"); err != nil {
		c.Close()
		return nil, fmt.Errorf("subscribe to newHeads at %s: %w", endpoint, err)
	}
	go func() {
		for h := range ch {
			f.mu.Lock()
			f.arrived[uint64(h.Number)] = time.Now()
			f.mu.Unlock()
		}
	}()
	go func() {
		<-f.sub.Err()
		close(ch)
	}()
	f.source = pipeline.SourceSpec{Name: LiveSource, Format: "ethrpc", URI: endpoint + "?" + param + "maxBlocksPerTrigger=20&confirmations=0"}
	return f, nil
}

// announced is when block num (of hash) was announced.
func (f *freshnessFeed) announced(num uint64, hash string) (time.Time, bool) {
	if f.node != nil {
		return f.node.AnnouncedAt(common.HexToHash(hash))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.arrived[num]
	return t, ok
}

func (f *freshnessFeed) close() {
	if f.node != nil {
		_ = f.node.Close()
	}
	if f.sub != nil {
		f.sub.Unsubscribe()
		f.client.Close()
	}
}

// freshRecorder turns each data batch's progress event into the freshness
// of the blocks it committed, and ends the run after want blocks.
type freshRecorder struct {
	feed *freshnessFeed
	want int
	done context.CancelFunc
	log  io.Writer
	dir  string // the run's directory: its file counts are sampled

	mu        sync.Mutex
	first     time.Time  // the first measured batch
	mid       fileCounts // sampled when half the blocks were measured
	sampled   bool       // mid is set
	fresh     []float64  // ms, in block order
	batches   int
	rssStart  int64
	metrics   map[string]string
	missing   int
	lastBlock uint64
	phases    map[string][]float64
}

func (r *freshRecorder) OnProgress(p *stream.Progress) {
	now := time.Now()
	if p.Kind() != stream.KindData || len(p.Sources) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches++
	if r.batches == 1 {
		// The first batch opens the state and creates the table, and
		// catches up with the blocks mined meanwhile: a warm-up, not measured.
		r.rssStart = currentRSS()
		r.first = now
		return
	}
	src := p.Sources[0]
	start, hasStart, _ := ethrpc.ParseOffset(src.StartOffset)
	end, ok, _ := ethrpc.ParseOffset(src.EndOffset)
	if !ok || len(r.fresh) >= r.want {
		return
	}
	r.metrics = src.Metrics
	if r.phases == nil {
		r.phases = map[string][]float64{}
	}
	for k, v := range p.DurationMs {
		r.phases[k] = append(r.phases[k], float64(v))
	}
	first := end.Block - uint64(src.NumInputRows) + 1
	if hasStart {
		first = start.Block + 1
	}
	for num := first; num <= end.Block && len(r.fresh) < r.want; num++ {
		hash := end.Hash
		if r.feed.node != nil && num != end.Block {
			if h := r.feed.node.Header(num); h != nil {
				hash = h.Hash().Hex()
			}
		}
		t, ok := r.feed.announced(num, hash)
		if !ok {
			r.missing++
			continue
		}
		r.fresh = append(r.fresh, float64(now.Sub(t).Microseconds())/1000)
	}
	r.lastBlock = end.Block
	if !r.sampled && len(r.fresh) >= r.want/2 {
		r.sampled = true
		// Once, so counting the files costs one batch its latency.
		r.mid = countRun(r.dir, now.Sub(r.first))
	}
	if n := len(r.fresh); n%1000 == 0 || n >= r.want {
		fmt.Fprintf(r.log, "  %d blocks, %d batches\n", n, r.batches)
	}
	if len(r.fresh) >= r.want {
		r.done()
	}
}

func (r *freshRecorder) summarise(res *FreshnessResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	xs := append([]float64(nil), r.fresh...)
	sort.Float64s(xs)
	res.Blocks, res.Batches, res.RSSStart, res.Mid = len(xs), r.batches-1, r.rssStart, r.mid
	if len(xs) > 0 {
		res.P50Ms, res.P99Ms, res.MaxMs = percentile(xs, 0.50), percentile(xs, 0.99), xs[len(xs)-1]
	}
	res.Resubscribe, res.Notified = r.metrics["subscribes"], r.metrics["headNotifications"]
	res.PhaseMedianMs, res.PhaseP99Ms = map[string]float64{}, map[string]float64{}
	for k, v := range r.phases {
		sort.Float64s(v)
		res.PhaseMedianMs[k], res.PhaseP99Ms[k] = percentile(v, 0.5), percentile(v, 0.99)
	}
}

// percentile is the nearest-rank q-quantile of sorted xs.
func percentile(xs []float64, q float64) float64 {
	i := int(q*float64(len(xs))+0.5) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// countTable counts a table's data files on disk and its log entries.
func countTable(table string) (data, log int) {
	_ = filepath.WalkDir(table, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if strings.Contains(filepath.ToSlash(p), "/_delta_log/") {
			log++
		} else if strings.HasSuffix(p, ".parquet") {
			data++
		}
		return nil
	})
	return data, log
}

func countFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// PrintFreshness prints a freshness run against the targets of issue 29.
func PrintFreshness(w io.Writer, r *FreshnessResult) {
	mb := func(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
	fmt.Fprintf(w, "| freshness (query %s: %s; %s, trigger %s, %d blocks, %d batches) | measured | target |\n|---|---|---|\n",
		r.Query, freshnessQuery(r.Query).What, r.Endpoint, r.Trigger, r.Blocks, r.Batches)
	fmt.Fprintf(w, "| head announced -> batch committed, p50 | %.1f ms | <= 25 ms |\n", r.P50Ms)
	fmt.Fprintf(w, "| head announced -> batch committed, p99 | %.1f ms | <= 100 ms |\n", r.P99Ms)
	fmt.Fprintf(w, "| head announced -> batch committed, max | %.1f ms | |\n", r.MaxMs)
	fmt.Fprintf(w, "| RSS after the first batch / at the end | %s / %s | flat |\n", mb(r.RSSStart), mb(r.RSSEnd))
	fmt.Fprintf(w, "| table: data files on disk / _delta_log entries | %d / %d | bounded |\n", r.TableFiles, r.LogFiles)
	fmt.Fprintf(w, "| checkpoint files | %d | bounded |\n", r.CkptFiles)
	fmt.Fprintf(w, "| newHeads subscriptions / notifications | %s / %s | |\n", r.Resubscribe, r.Notified)
	keys := make([]string, 0, len(r.PhaseMedianMs))
	for k := range r.PhaseMedianMs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f / %.0f", k, r.PhaseMedianMs[k], r.PhaseP99Ms[k]))
	}
	fmt.Fprintf(w, "| batch phases, median / p99 ms | %s | |\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "| midpoint (%.0f s in): table data files / _delta_log entries; checkpoint files | %d / %d; %d | |\n",
		float64(r.Mid.AtMs)/1000, r.Mid.TableFiles, r.Mid.LogFiles, r.Mid.CkptFiles)
	printTargets(w, r.Targets)
}

// WriteFreshnessJSON writes r as indented JSON to path, as WriteBenchJSON does.
func WriteFreshnessJSON(path string, r *FreshnessResult) error { return writeJSON(path, r) }

// WriteFreshnessListJSON writes several freshness runs (one per
// --freshness-query) as an indented JSON list.
func WriteFreshnessListJSON(path string, rs []*FreshnessResult) error { return writeJSON(path, rs) }
