package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethstream/ethstream/chain"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// The recount of check 8 counts blocks per (5-minute window, source, miner)
// from the raw blocks, independently of the engine: the archive's Parquet
// files are read here, two columns at a time, with parquet-go's page API,
// and the live blocks are the node's headers over JSON-RPC. The seed preset
// has ~26M blocks in ~10M groups, so a group is a fixed-size key and the
// miners are interned: the counts are one pointer-free map of ~300 MB that
// the garbage collector never scans.

// Source ids of a groupKey.
const (
	srcArchive uint8 = iota
	srcLive
)

// groupKey is one group of the reference query: the window start in µs,
// the miner's id in the recount's miner table, and the source id.
type groupKey struct {
	start  int64
	miner  uint32
	source uint8
}

// groupCounts is the outcome of a recount.
type groupCounts struct {
	counts map[groupKey]int64
	mu     sync.Mutex        // guards counts and miners while the recount runs
	miners map[string]uint32 // lowercase address -> id
}

func newGroupCounts(sizeHint int) *groupCounts {
	return &groupCounts{counts: make(map[groupKey]int64, sizeHint), miners: map[string]uint32{}}
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

// key is the group of a table row; ok is false if the recount never saw its
// source or miner (so the row cannot be one of its groups). The miner is
// compared as it is stored: a table miner in another case is another group.
func (g *groupCounts) key(start int64, source, miner string) (groupKey, bool) {
	k := groupKey{start: start}
	switch source {
	case ArchiveSource:
		k.source = srcArchive
	case LiveSource:
		k.source = srcLive
	default:
		return k, false
	}
	id, ok := g.miners[miner]
	k.miner = id
	return k, ok
}

// windowStart is the start of the 5-minute window holding a timestamp in µs.
func windowStart(us int64) int64 {
	size := int64(5 * time.Minute / time.Microsecond)
	return us - ((us%size)+size)%size
}

func windowOf(ts time.Time) int64 { return windowStart(ts.UnixMicro()) }

// recount counts the archive's files and the live blocks liveFirst..liveLast
// (none if liveLast < liveFirst). sizeHint is the expected number of groups.
func recount(ctx context.Context, root string, files []chain.ManifestFile, nodeURL string, liveFirst, liveLast uint64, sizeHint int) (*groupCounts, error) {
	g := newGroupCounts(sizeHint)
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
		k := groupKey{start: windowStart(int64(h.Time) * 1_000_000), source: srcLive, miner: g.minerID(strings.ToLower(h.Coinbase.Hex()))}
		g.counts[k]++
	}
	return g, nil
}

// countArchive decodes the files on GOMAXPROCS goroutines. Each counts one
// file into its own small map and adds it to the total under the lock.
func (g *groupCounts) countArchive(ctx context.Context, root string, files []chain.ManifestFile) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan string)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	workers := min(runtime.GOMAXPROCS(0), max(len(files), 1))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fc := fileCounter{g: g, local: map[groupKey]int64{}, ids: map[string]uint32{}}
			for p := range next {
				if err := fc.count(p); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				g.mu.Lock()
				for k, c := range fc.local {
					g.counts[k] += c
				}
				g.mu.Unlock()
				clear(fc.local)
			}
		}()
	}
feed:
	for _, f := range files {
		select {
		case next <- filepath.Join(root, filepath.FromSlash(f.Key)):
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// fileCounter is one goroutine's decoding state, reused across files.
type fileCounter struct {
	g     *groupCounts
	local map[groupKey]int64
	ids   map[string]uint32 // miner as stored in a file -> id (no lock needed)
	ts    []int64
	miner []uint32
	vals  []parquet.Value
	dict  parquet.Dictionary
	dids  []uint32 // ids of dict's entries
}

// count adds one archive file's blocks to fc.local.
func (fc *fileCounter) count(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("recount: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("recount: %w", err)
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return fmt.Errorf("recount: open %s: %w", path, err)
	}
	tsCol, ok1 := pf.Schema().Lookup("timestamp")
	minerCol, ok2 := pf.Schema().Lookup("miner")
	if !ok1 || !ok2 {
		return fmt.Errorf("recount: %s has no timestamp or miner column", path)
	}
	scale, err := microsPerUnit(tsCol.Node)
	if err != nil {
		return fmt.Errorf("recount: %s: %w", path, err)
	}
	if minerCol.Node.Type().Kind() != parquet.ByteArray {
		return fmt.Errorf("recount: %s: miner is %s, want a string", path, minerCol.Node.Type())
	}
	fc.dict = nil
	for _, rg := range pf.RowGroups() {
		cols := rg.ColumnChunks()
		if err := fc.readTimestamps(cols[tsCol.ColumnIndex]); err != nil {
			return fmt.Errorf("recount: %s: timestamp: %w", path, err)
		}
		if err := fc.readMiners(cols[minerCol.ColumnIndex]); err != nil {
			return fmt.Errorf("recount: %s: miner: %w", path, err)
		}
		if int64(len(fc.ts)) != rg.NumRows() || len(fc.miner) != len(fc.ts) {
			return fmt.Errorf("recount: %s: %d timestamps and %d miners in a row group of %d rows", path, len(fc.ts), len(fc.miner), rg.NumRows())
		}
		for i, ts := range fc.ts {
			fc.local[groupKey{start: windowStart(ts * scale), miner: fc.miner[i], source: srcArchive}]++
		}
	}
	return nil
}

// microsPerUnit accepts an INT64 timestamp in micro- or milliseconds.
func microsPerUnit(n parquet.Node) (int64, error) {
	if n.Type().Kind() == parquet.Int64 {
		if lt := n.Type().LogicalType(); lt != nil {
			if ts, ok := lt.Value.(*format.TimestampType); ok {
				switch ts.Unit.Value.(type) {
				case *format.MicroSeconds:
					return 1, nil
				case *format.MilliSeconds:
					return 1000, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("timestamp is %s, want an INT64 timestamp in micro- or milliseconds", n.Type())
}

// eachPage calls fn for every page of a column chunk, refusing nulls.
func eachPage(cc parquet.ColumnChunk, fn func(parquet.Page) error) error {
	pages := cc.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if p.NumNulls() > 0 {
			parquet.Release(p)
			return fmt.Errorf("%d null values", p.NumNulls())
		}
		err = fn(p)
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
}

func (fc *fileCounter) readTimestamps(cc parquet.ColumnChunk) error {
	fc.ts = fc.ts[:0]
	return eachPage(cc, func(p parquet.Page) error {
		if d := p.Dictionary(); d != nil {
			data := p.Data()
			for _, i := range data.Int32() {
				fc.ts = append(fc.ts, d.Index(i).Int64())
			}
			return nil
		}
		data := p.Data()
		fc.ts = append(fc.ts, data.Int64()...)
		return nil
	})
}

// readMiners turns every miner of the chunk into its id: per dictionary
// entry for a dictionary-encoded chunk, per value otherwise.
func (fc *fileCounter) readMiners(cc parquet.ColumnChunk) error {
	fc.miner = fc.miner[:0]
	return eachPage(cc, func(p parquet.Page) error {
		if d := p.Dictionary(); d != nil {
			if d != fc.dict {
				fc.dict, fc.dids = d, fc.dids[:0]
				for i := range d.Len() {
					fc.dids = append(fc.dids, fc.id(d.Index(int32(i)).ByteArray()))
				}
			}
			data := p.Data()
			for _, i := range data.Int32() {
				if i < 0 || int(i) >= len(fc.dids) {
					return fmt.Errorf("dictionary index %d of %d entries", i, len(fc.dids))
				}
				fc.miner = append(fc.miner, fc.dids[i])
			}
			return nil
		}
		r := p.Values()
		for {
			if cap(fc.vals) == 0 {
				fc.vals = make([]parquet.Value, 1024)
			}
			n, err := r.ReadValues(fc.vals[:cap(fc.vals)])
			for _, v := range fc.vals[:n] {
				fc.miner = append(fc.miner, fc.id(v.ByteArray()))
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
}

// id is the id of a miner as a file stores it; the recount counts miners
// lowercased, as the reference query does.
func (fc *fileCounter) id(stored []byte) uint32 {
	if id, ok := fc.ids[string(stored)]; ok {
		return id
	}
	s := string(stored)
	fc.g.mu.Lock()
	id := fc.g.minerID(strings.ToLower(s))
	fc.g.mu.Unlock()
	fc.ids[s] = id
	return id
}
