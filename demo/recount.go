package demo

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/internal/readahead"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// The recount of check 8 counts blocks per (5-minute window, source, miner)
// from the raw blocks, independently of the engine: the archive's Parquet
// files are read here, two columns at a time, with parquet-go's page API,
// and the live blocks are the node's headers over JSON-RPC.
//
// The seed preset has ~26M blocks in ~10M groups. The archive's groups are
// one sorted, pointer-free slice of 16-byte entries (~160 MB), not a map:
// each file's groups are sorted where they are counted and appended in
// manifest (date) order, so the slice is built already sorted, and the
// table's rows, sorted within each of its data files, are looked up by a
// search that starts where the last one ended (lookup). A map of the same
// groups took twice the memory and a cache miss per row.

// archiveGroup is one archive group: the window start in µs, the miner's id
// in the recount's miner table, and the number of blocks.
type archiveGroup struct {
	start int64
	miner uint32
	count uint32
}

func groupCmp(a, b archiveGroup) int {
	if c := cmp.Compare(a.start, b.start); c != 0 {
		return c
	}
	return cmp.Compare(a.miner, b.miner)
}

// liveKey is one group of the live source.
type liveKey struct {
	start int64
	miner uint32
}

// groupCounts is the outcome of a recount. While the recount runs, mu
// guards miners.
type groupCounts struct {
	archive []archiveGroup // sorted by (start, miner), one entry per group
	live    map[liveKey]int64
	mu      sync.Mutex
	miners  map[string]uint32 // lowercase address -> id
	cursor  int               // where the last lookup ended
}

// minerID interns a lowercase miner address. Callers hold g.mu.
func (g *groupCounts) minerID(lower string) uint32 {
	id, ok := g.miners[lower]
	if !ok {
		id = uint32(len(g.miners))
		g.miners[lower] = id
	}
	return id
}

// lookup finds the archive group of (start, miner id): the index of the
// first entry not below it (ok if that entry is the group). It gallops from
// the previous lookup's index, so a run of nearby keys costs a few probes
// of nearby memory.
func (g *groupCounts) lookup(start int64, miner uint32) (int, bool) {
	a, key := g.archive, archiveGroup{start: start, miner: miner}
	below := func(i int) bool { return groupCmp(a[i], key) < 0 }
	// Every index < lo is below the key; every index >= hi is not.
	lo, hi := 0, len(a)
	if c := g.cursor; c < len(a) {
		if below(c) {
			lo = c + 1
			for step := 1; c+step < len(a); step *= 2 {
				if !below(c + step) {
					hi = c + step
					break
				}
				lo = c + step + 1
			}
		} else {
			hi = c
			for step := 1; c-step >= 0; step *= 2 {
				if below(c - step) {
					lo = c - step + 1
					break
				}
				hi = c - step
			}
		}
	}
	i := lo + sort.Search(hi-lo, func(k int) bool { return !below(lo + k) })
	g.cursor = i
	return i, i < len(a) && a[i].start == start && a[i].miner == miner
}

// windowStart is the start of the 5-minute window holding a timestamp in µs.
func windowStart(us int64) int64 {
	size := int64(5 * time.Minute / time.Microsecond)
	return us - ((us%size)+size)%size
}

func windowOf(ts time.Time) int64 { return windowStart(ts.UnixMicro()) }

// recount counts the archive's files and the live blocks liveFirst..liveLast
// (none if liveLast < liveFirst). sizeHint is the expected number of groups.
func recount(ctx context.Context, root string, files []archivegen.ManifestFile, nodeURL string, liveFirst, liveLast uint64, sizeHint int) (*groupCounts, error) {
	g := &groupCounts{archive: make([]archiveGroup, 0, sizeHint), live: map[liveKey]int64{}, miners: map[string]uint32{}}
	if err := g.countArchive(ctx, root, files); err != nil {
		return nil, err
	}
	if liveLast < liveFirst {
		return g, nil
	}
	c, err := ethclient.DialContext(ctx, nodeURL)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for n := liveFirst; n <= liveLast; n++ {
		h, err := c.HeaderByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			return nil, fmt.Errorf("recount: header %d: %w", n, err)
		}
		g.live[liveKey{windowStart(int64(h.Time) * 1_000_000), g.minerID(strings.ToLower(h.Coinbase.Hex()))}]++
	}
	return g, nil
}

// countArchive decodes the files on GOMAXPROCS goroutines, a bounded number
// of files ahead of this goroutine, which appends their sorted groups in
// manifest order. Should a file's groups not all follow the previous
// file's (a window in two files), the slice is sorted and merged at the end.
func (g *groupCounts) countArchive(ctx context.Context, root string, files []archivegen.ManifestFile) error {
	workers := runtime.GOMAXPROCS(0)
	sorted := true
	err := readahead.Map(ctx, len(files), workers, 4*workers, func() func(context.Context, int) ([]archiveGroup, error) {
		fc := fileCounter{g: g, local: map[liveKey]int64{}, ids: map[string]uint32{}}
		return func(_ context.Context, i int) ([]archiveGroup, error) {
			return fc.count(filepath.Join(root, filepath.FromSlash(files[i].Key)))
		}
	}, func(_ int, groups []archiveGroup) error {
		if n := len(g.archive); n > 0 && len(groups) > 0 && groupCmp(g.archive[n-1], groups[0]) >= 0 {
			sorted = false
		}
		g.archive = append(g.archive, groups...)
		return nil
	})
	if err != nil {
		return err
	}
	if !sorted {
		return g.sortAndMerge()
	}
	return nil
}

// sortAndMerge sorts the archive groups and adds up the entries of a group
// that several files hold.
func (g *groupCounts) sortAndMerge() error {
	a := g.archive
	slices.SortFunc(a, groupCmp)
	out := a[:0]
	for _, e := range a {
		if n := len(out); n > 0 && out[n-1].start == e.start && out[n-1].miner == e.miner {
			if out[n-1].count > math.MaxUint32-e.count {
				return fmt.Errorf("recount: more than %d blocks in the window at %d µs", uint32(math.MaxUint32), e.start)
			}
			out[n-1].count += e.count
			continue
		}
		out = append(out, e)
	}
	g.archive = out
	return nil
}

// fileCounter is one goroutine's decoding state, reused across files.
type fileCounter struct {
	g     *groupCounts
	local map[liveKey]int64 // one file's groups, as they are counted
	ids   map[string]uint32 // miner as stored in a file -> id (no lock needed)
}

// recountFields are the two columns the recount reads, decoded by the
// repository's one Parquet decoder (package columnar): timestamps in µs
// whatever their unit, miners as strings.
var recountFields = []columnar.Field{
	{Name: "timestamp", Type: stream.Timestamp, Required: true},
	{Name: "miner", Type: stream.String, Required: true},
}

// count counts one archive file's blocks: its groups, sorted.
func (fc *fileCounter) count(path string) ([]archiveGroup, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("recount: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("recount: %w", err)
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("recount: open %s: %w", path, err)
	}
	dec, err := columnar.Open(pf, recountFields, nil)
	if err != nil {
		return nil, fmt.Errorf("recount: %s: %w", path, err)
	}
	for g := range pf.RowGroups() {
		rg, err := dec.DecodeRowGroup(g)
		if err != nil {
			return nil, fmt.Errorf("recount: %s: %w", path, err)
		}
		ts, miner := &rg.Batch.Columns[0], &rg.Batch.Columns[1]
		if ts.Valid != nil || miner.Valid != nil {
			return nil, fmt.Errorf("recount: %s: null timestamp or miner values", path)
		}
		// A dictionary's rows share its strings, so a run of one miner
		// compares equal pointers: one id lookup per run, not per row.
		prev, prevID := "", uint32(0)
		for i, us := range ts.Int64s {
			m := miner.Strings[i]
			if i == 0 || m != prev {
				prev, prevID = m, fc.id(m)
			}
			fc.local[liveKey{windowStart(us), prevID}]++
		}
	}
	groups := make([]archiveGroup, 0, len(fc.local))
	for k, c := range fc.local {
		if c > math.MaxUint32 {
			return nil, fmt.Errorf("recount: %s: %d blocks in the window at %d µs", path, c, k.start)
		}
		groups = append(groups, archiveGroup{start: k.start, miner: k.miner, count: uint32(c)})
	}
	clear(fc.local)
	slices.SortFunc(groups, groupCmp)
	return groups, nil
}

// id is the id of a miner as a file stores it; the recount counts miners
// lowercased, as the reference query does.
func (fc *fileCounter) id(s string) uint32 {
	if id, ok := fc.ids[s]; ok {
		return id
	}
	fc.g.mu.Lock()
	id := fc.g.minerID(strings.ToLower(s))
	fc.g.mu.Unlock()
	fc.ids[s] = id
	return id
}
