package demo

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/textwrap"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/stream"
)

// PhaseLiveReorgs follows the head at confirmations=0 with reorg=retract
// while the embedded node reorganises its chain at random depths; it runs on
// a checkpoint and table of its own (<workdir>/reorgs), so the lifecycle's
// checks above are not affected by it.
const PhaseLiveReorgs = "live_reorgs"

// reorgSourceDepth is the source's reorgDepth in the phase; the node's
// reorgs are at most Options.ReorgMaxDepth deep.
const reorgSourceDepth = 16

// nodeReorg is one reorganisation the demo made the node do.
type nodeReorg struct {
	afterBatch int // data batches of the start seen when it was made; -1 = while stopped
	depth      int
	oldHead    string
	newHead    string
}

// reorgPhase runs and verifies the live_reorgs phase.
type reorgPhase struct {
	o     Options
	env   *Env
	dir   string
	rng   *rand.Rand
	first uint64 // start_block of the phase's source

	mu     sync.Mutex
	reorgs []nodeReorg
}

// runLiveReorgs runs the phase as three starts of the same query: two
// following the head while the node moves and reorganises (and reorganises
// once more while the query is stopped between them, deeper than what the
// query had not read yet), then an available-now start that catches up with
// the quiet chain. It checks the table after every batch against a recount
// of the canonical chain at that batch's end, and writes reorgs.csv.
func runLiveReorgs(ctx context.Context, o Options, env *Env) ([]PhaseResult, []Check, []BatchRecord, error) {
	p := &reorgPhase{o: o, env: env, dir: filepath.Join(o.WorkDir, "reorgs"),
		rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x72656f7267))}
	if err := os.RemoveAll(p.dir); err != nil {
		return nil, nil, nil, fmt.Errorf("clear %s: %w", p.dir, err)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, nil, nil, fmt.Errorf("create %s: %w", p.dir, err)
	}
	head := env.Node.Head()
	p.first = max(env.Manifest.LastBlock+1, head-min(head, 2*uint64(o.BlocksPerBatch)))
	src := pipeline.SourceSpec{Name: LiveSource, Format: "ethrpc", URI: fmt.Sprintf(
		"%s?maxBlocksPerTrigger=%d&start_block=%d&confirmations=0&reorg=retract&reorgDepth=%d",
		env.Node.URL(), o.BlocksPerBatch, p.first, reorgSourceDepth)}
	var results []PhaseResult
	var files []string
	var phaseFiles []engine.PhaseFile
	for start := 1; start <= 3; start++ {
		trig, batches := p.betweenStarts(start, files)
		cfg := pipeline.Config{
			Checkpoint:   filepath.Join(p.dir, "checkpoint"),
			Table:        filepath.Join(p.dir, "table"),
			LocalDir:     filepath.Join(p.dir, "state-cache"),
			Sources:      []pipeline.SourceSpec{src},
			Conf:         EvolutionConf(8),
			Trigger:      trig,
			MaxBatches:   batches,
			Logger:       o.Logger.With("phase", PhaseLiveReorgs, "start", start),
			ProgressFile: filepath.Join(p.dir, fmt.Sprintf("progress-%d.jsonl", start)),
		}
		files = append(files, cfg.ProgressFile)
		name := fmt.Sprintf("%s#%d", PhaseLiveReorgs, start)
		phaseFiles = append(phaseFiles, engine.PhaseFile{Phase: name, Path: cfg.ProgressFile})
		o.Observer.PhaseStarted(PhaseResult{Name: name, Sources: []string{LiveSource}, Conf: cfg.Conf,
			Trigger: trigString(cfg.Trigger, cfg.MaxBatches), Progress: cfg.ProgressFile})
		fmt.Fprintf(o.Out, "==> %s\n%s", PhaseLiveReorgs, commandLines("    ethstream", cfg.Args(), summaryWidth))
		t0 := time.Now()
		if start < 3 {
			env.Node.OnHeadRequest(p.driver())
		}
		err := o.Runner.RunPhase(ctx, PhaseLiveReorgs, cfg)
		env.Node.OnHeadRequest(nil)
		res := PhaseResult{Name: name, Sources: []string{LiveSource}, Conf: cfg.Conf,
			Trigger: trigString(cfg.Trigger, cfg.MaxBatches), Err: err, Duration: time.Since(t0), Progress: cfg.ProgressFile}
		results = append(results, res)
		o.Observer.PhaseEnded(res)
		if err != nil {
			fmt.Fprint(o.Out, textwrap.Words("    "+PhaseLiveReorgs+": "+err.Error(), "      ", summaryWidth))
			return results, nil, nil, fmt.Errorf("phase %s: %w", name, err)
		}
		fmt.Fprintf(o.Out, "    %s done in %s\n", PhaseLiveReorgs, res.Duration.Round(time.Millisecond))
	}
	checks, err := p.verify(ctx, files)
	if err != nil {
		return results, nil, nil, err
	}
	batches, err := flattenReorgs(o.ResultsDir, phaseFiles)
	return results, checks, batches, err
}

// betweenStarts moves the node before a start of the phase and returns the
// start's trigger: before the second, a reorganisation while the query is
// down, reaching below the last block it committed; before the third, one
// more move, which the available-now start catches up with.
func (p *reorgPhase) betweenStarts(start int, files []string) (engine.Trigger, int) {
	o, env := p.o, p.env
	switch start {
	case 2:
		unread := uint64(0)
		if b, ok := lastEnd(files[0]); ok && env.Node.Head() > b {
			unread = env.Node.Head() - b
		}
		p.reorgAt(-1, int(unread)+1+p.rng.IntN(o.ReorgMaxDepth))
		env.Node.Mine(1)
	case 3:
		p.step(-1)
		return engine.Trigger{Kind: engine.AvailableNow}, 0
	}
	return engine.Trigger{Kind: engine.ProcessingTime, Interval: o.TriggerInterval}, o.ReorgBatches
}

// flattenReorgs flattens the phase's own progress like the lifecycle's,
// into resultsDir/reorgs, and reads its batches back.
func flattenReorgs(resultsDir string, phaseFiles []engine.PhaseFile) ([]BatchRecord, error) {
	flat := filepath.Join(resultsDir, "reorgs")
	if err := os.MkdirAll(flat, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", flat, err)
	}
	// A start that ran no batch wrote no progress file (see readEvents).
	phaseFiles = slices.DeleteFunc(phaseFiles, func(f engine.PhaseFile) bool {
		_, err := os.Stat(f.Path)
		return errors.Is(err, fs.ErrNotExist)
	})
	if err := engine.FlattenProgress(vfs.Default, flat, phaseFiles); err != nil {
		return nil, err
	}
	return ReadBatches(filepath.Join(flat, "batches.csv"))
}

// reorg makes the node reorganise 1..ReorgMaxDepth blocks and records it.
func (p *reorgPhase) reorg(afterBatch int) { p.reorgAt(afterBatch, 1+p.rng.IntN(p.o.ReorgMaxDepth)) }

func (p *reorgPhase) reorgAt(afterBatch, depth int) {
	n := p.env.Node
	old := n.Header(n.Head())
	n.Reorg(depth)
	nw := n.Header(n.Head())
	if old == nil || nw == nil {
		return
	}
	p.mu.Lock()
	p.reorgs = append(p.reorgs, nodeReorg{afterBatch: afterBatch, depth: depth,
		oldHead: strings.ToLower(old.Hash().Hex()), newHead: strings.ToLower(nw.Hash().Hex())})
	p.mu.Unlock()
}

// driver returns the node's schedule for one following start: the start's
// first head request plans its first batch on the chain as it is; each later
// one (the query polls the head once per trigger, after the previous batch
// committed) first moves the node: often one or two reorgs of random depth
// (two: both fall inside the next batch), then a few new blocks. The moves
// are drawn from the phase's seeded generator in request order, so the
// chains and every batch are the same on every run.
func (p *reorgPhase) driver() func() {
	polls := 0
	return func() {
		polls++
		if polls == 1 {
			return
		}
		p.step(polls - 1)
	}
}

// step moves the node once: often one or two reorgs, then 1-3 new blocks.
func (p *reorgPhase) step(afterBatch int) {
	if p.rng.IntN(10) < 4 {
		p.reorg(afterBatch)
		if p.rng.IntN(4) == 0 {
			p.reorg(afterBatch)
		}
	}
	p.env.Node.Mine(1 + p.rng.IntN(3))
}

// lastEnd is the end block of the last data batch in a progress file.
func lastEnd(path string) (uint64, bool) {
	evs, err := readEvents([]string{path})
	if err != nil {
		return 0, false
	}
	for i := len(evs[0]) - 1; i >= 0; i-- {
		if ev := evs[0][i]; ev.Kind() == stream.KindData && len(ev.Sources) == 1 {
			if o, ok, err := ethrpc.ParseOffset(ev.Sources[0].EndOffset); err == nil && ok {
				return o.Block, true
			}
		}
	}
	return 0, false
}

// readEvents reads the progress events of the phase's starts.
func readEvents(files []string) (events [][]stream.Progress, err error) {
	for _, f := range files {
		fh, err := os.Open(f)
		if errors.Is(err, fs.ErrNotExist) {
			// A start that ran no batch (the chain did not move while it
			// polled) appends no event, so its file never appears.
			events = append(events, nil)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		var evs []stream.Progress
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var ev stream.Progress
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				fh.Close()
				return nil, fmt.Errorf("parse %s: %w", f, err)
			}
			evs = append(evs, ev)
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		events = append(events, evs)
	}
	return events, nil
}

// chainIndex serves headers by hash from the node (orphaned ones included),
// each fetched once.
type chainIndex struct {
	c     *ethclient.Client
	byHas map[string]*types.Header
}

func (ci *chainIndex) header(ctx context.Context, hash string) (*types.Header, error) {
	if h, ok := ci.byHas[hash]; ok {
		return h, nil
	}
	h, err := ci.c.HeaderByHash(ctx, common.HexToHash(hash))
	if err != nil {
		return nil, fmt.Errorf("header %s: %w", hash, err)
	}
	ci.byHas[hash] = h
	return h, nil
}

// chain returns the headers of the chain ending at hash, from block first up.
func (ci *chainIndex) chain(ctx context.Context, hash string, first uint64) ([]*types.Header, error) {
	var out []*types.Header
	for {
		h, err := ci.header(ctx, hash)
		if err != nil {
			return nil, err
		}
		if h.Number.Uint64() < first {
			break
		}
		out = append(out, h)
		if h.Number.Uint64() == first {
			break
		}
		hash = strings.ToLower(h.ParentHash.Hex())
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// countHeaders is the reference query over headers: blocks per (5-minute
// window, miner) of the live source.
func countHeaders(hs []*types.Header) map[windowKey]int64 {
	m := map[windowKey]int64{}
	for _, h := range hs {
		m[windowKey{windowOf(time.Unix(int64(h.Time), 0).UTC()), LiveSource, strings.ToLower(h.Coinbase.Hex())}]++
	}
	return m
}

// tableAt reads the eth_live rows of the table at version.
func tableAt(ctx context.Context, path string, version int64) (map[windowKey]int64, error) {
	m := map[windowKey]int64{}
	err := tableRows(ctx, path, version, func(r tableRow) error {
		k := windowKey{r.WindowStart, r.Source, r.Miner}
		if _, dup := m[k]; dup {
			return fmt.Errorf("table version %d: duplicate row %v", version, k)
		}
		m[k] = r.Count
		return nil
	})
	return m, err
}

// diffRows counts the keys whose counts differ.
func diffRows(a, b map[windowKey]int64) int {
	n := 0
	for k, v := range a {
		if b[k] != v {
			n++
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			n++
		}
	}
	return n
}

// reorgRecord is one row of reorgs.csv.
type reorgRecord struct {
	start, batchID              int64
	endBlock                    uint64
	fork                        string
	retracted, inserted, depth  int64
	oldTip, newTip              string
	tableRows, recountRows, bad int
	deleted                     string
}

// verify checks every batch of the phase and the orphans, and writes reorgs.csv.
func (p *reorgPhase) verify(ctx context.Context, files []string) ([]Check, error) {
	events, err := readEvents(files)
	if err != nil {
		return nil, err
	}
	c, err := ethclient.DialContext(ctx, p.env.Node.URL())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ci := &chainIndex{c: c, byHas: map[string]*types.Header{}}
	table := filepath.Join(p.dir, "table")
	w, err := p.walk(ctx, ci, events, table)
	if err != nil {
		return nil, err
	}
	if w.batches == 0 {
		return nil, fmt.Errorf("phase %s ran no data batch", PhaseLiveReorgs)
	}
	if err := writeReorgsCSV(filepath.Join(p.o.ResultsDir, "reorgs", "reorgs.csv"), w.recs); err != nil {
		return nil, err
	}
	return p.chainChecks(ctx, ci, table, w)
}

// chainChecks is check 10: the orphans (the old chains above each
// ancestor) against the final chain, and the final table against a recount
// of the node's canonical chain, with and without the orphans.
func (p *reorgPhase) chainChecks(ctx context.Context, ci *chainIndex, table string, w *reorgWalk) ([]Check, error) {
	seen, last, lastVersion, batches, bad, deleted, restartRetracted := w.seen, w.last, w.lastVersion, w.batches, w.bad, w.deleted, w.restartRetracted
	final, err := ci.chain(ctx, last.Hash, p.first)
	if err != nil {
		return nil, err
	}
	onFinal := map[string]bool{}
	for _, h := range final {
		onFinal[strings.ToLower(h.Hash().Hex())] = true
	}
	orphans := map[string]*types.Header{}
	var retracted int64
	for _, r := range seen {
		retracted += r.BlocksRetracted
		hs, err := ci.chain(ctx, r.OldTip, r.Ancestor+1)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			orphans[strings.ToLower(h.Hash().Hex())] = h
		}
	}
	orphanOnFinal := 0
	withOrphans := append([]*types.Header(nil), final...)
	for h, hdr := range orphans {
		if onFinal[h] {
			orphanOnFinal++
		}
		withOrphans = append(withOrphans, hdr)
	}
	// The node's canonical chain now, by number.
	canonical := make([]*types.Header, 0, len(final))
	for n := p.first; n <= last.Block; n++ {
		h := p.env.Node.Header(n)
		if h == nil {
			return nil, fmt.Errorf("node has no block %d", n)
		}
		canonical = append(canonical, h)
	}
	got, err := tableAt(ctx, table, lastVersion)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	made := append([]nodeReorg(nil), p.reorgs...)
	p.mu.Unlock()
	depths := make([]string, 0, len(made))
	for _, r := range made {
		depths = append(depths, strconv.Itoa(r.depth))
	}
	var seenDepths []string
	for _, r := range seen {
		seenDepths = append(seenDepths, strconv.FormatInt(r.Depth, 10))
	}
	cs := []Check{
		figure("10. live_reorgs: reorgs the node made (depths)", fmt.Sprintf("%d (%s)", len(made), strings.Join(depths, " "))),
		figure("10. live_reorgs: reorgs the query retracted (depths)", fmt.Sprintf("%d (%s)", len(seen), strings.Join(seenDepths, " "))),
		check("10. live_reorgs: the query retracted reorgs", true, len(seen) > 0 && len(made) > 0),
		check(fmt.Sprintf("10. live_reorgs: batches whose table differs from a recount of the canonical chain at their end (of %d)", batches), 0, bad),
		check("10. live_reorgs: final table = recount of the node's canonical chain (rows differing)", 0, diffRows(got, countHeaders(canonical))),
		check("10. live_reorgs: blocks retracted = distinct orphaned blocks", retracted, len(orphans)),
		check("10. live_reorgs: orphaned blocks on the final chain", 0, orphanOnFinal),
		check("10. live_reorgs: counting the orphans too would change table rows", true, diffRows(got, countHeaders(withOrphans)) > 0),
		check("10. live_reorgs: the reorg made while the query was stopped is retracted by the restart's first batch", true, restartRetracted),
		figure("10. live_reorgs: MERGE rows deleted (numTargetRowsDeleted)", deleted),
	}
	return cs, nil
}

// reorgWalk is what verify gathers from the phase's batches: a record per
// data batch, the reorgs the query reported, and the last end offset and
// table version.
type reorgWalk struct {
	recs             []reorgRecord
	seen             []ethrpc.Reorg
	bad, batches     int
	deleted          int64
	restartRetracted bool
	last             ethrpc.Offset
	lastVersion      int64
}

// walk reads every data batch of the phase's starts: its end offset and
// reorgs, and the table at its version against a recount of the chain
// ending at its end.
func (p *reorgPhase) walk(ctx context.Context, ci *chainIndex, events [][]stream.Progress, table string) (*reorgWalk, error) {
	w := &reorgWalk{lastVersion: -1}
	for si, evs := range events {
		firstData := true
		for _, ev := range evs {
			if ev.Kind() != stream.KindData || len(ev.Sources) != 1 {
				continue
			}
			s := ev.Sources[0]
			end, ok, err := ethrpc.ParseOffset(s.EndOffset)
			if err != nil || !ok {
				return nil, fmt.Errorf("batch %d: end offset %s: %v", ev.BatchID, s.EndOffset, err)
			}
			rs, err := ethrpc.ParseReorgs(s.Metrics["reorgs"])
			if err != nil {
				return nil, fmt.Errorf("batch %d: %w", ev.BatchID, err)
			}
			version, err := strconv.ParseInt(ev.Sink.Metrics["tableVersion"], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("batch %d: sink tableVersion %q", ev.BatchID, ev.Sink.Metrics["tableVersion"])
			}
			hs, err := ci.chain(ctx, end.Hash, p.first)
			if err != nil {
				return nil, err
			}
			want := countHeaders(hs)
			got, err := tableAt(ctx, table, version)
			if err != nil {
				return nil, err
			}
			r := reorgRecord{start: int64(si + 1), batchID: ev.BatchID, endBlock: end.Block, tableRows: len(got),
				recountRows: len(want), bad: diffRows(got, want), deleted: ev.Sink.Metrics["numTargetRowsDeleted"]}
			if end.HasFork {
				r.fork = strconv.FormatUint(end.Fork, 10)
			}
			for _, x := range rs {
				r.retracted += x.BlocksRetracted
				r.inserted += x.BlocksInserted
				r.depth = max(r.depth, x.Depth)
				r.oldTip, r.newTip = x.OldTip, x.NewTip
			}
			if si == 1 && firstData && len(rs) > 0 {
				w.restartRetracted = true
			}
			firstData = false
			if d, err := strconv.ParseInt(r.deleted, 10, 64); err == nil {
				w.deleted += d
			}
			w.seen = append(w.seen, rs...)
			w.recs = append(w.recs, r)
			w.batches++
			if r.bad > 0 {
				w.bad++
			}
			w.last, w.lastVersion = end, version
		}
	}
	return w, nil
}

// writeReorgsCSV writes reorgs.csv (format in doc.go).
func writeReorgsCSV(path string, recs []reorgRecord) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].batchID < recs[j].batchID })
	return writeFile(path, func(f io.Writer) error {
		w := csv.NewWriter(f)
		w.Write([]string{"start", "batch_id", "end_block", "fork", "blocks_retracted", "blocks_inserted", "reorg_depth",
			"old_tip", "new_tip", "table_rows", "recount_rows", "rows_differing", "rows_deleted"})
		for _, r := range recs {
			w.Write([]string{strconv.FormatInt(r.start, 10), strconv.FormatInt(r.batchID, 10), strconv.FormatUint(r.endBlock, 10),
				r.fork, strconv.FormatInt(r.retracted, 10), strconv.FormatInt(r.inserted, 10), strconv.FormatInt(r.depth, 10),
				r.oldTip, r.newTip, strconv.Itoa(r.tableRows), strconv.Itoa(r.recountRows), strconv.Itoa(r.bad), r.deleted})
		}
		w.Flush()
		return w.Error()
	})
}
