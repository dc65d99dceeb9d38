package archivegen

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
)

// Options configures Generate.
type Options struct {
	Out      string // archive root; created if missing
	Preset   chain.Preset
	Seed     int64
	Workers  int                             // parallel day builders/encoders; default GOMAXPROCS
	Progress func(doneFiles, totalFiles int) // optional; called from one goroutine at a time
	// Tables are the tables to write besides blocks (ParseTables): each
	// needs the days' bodies (chain.Day.AddBodies), which cost far more
	// than the headers and change the block hashes (the roots become the
	// bodies'), so a blocks-only archive derives none.
	Tables []string
}

// Archive row layouts, one per schema era. Column names and types follow the
// AWS public blockchain dataset; the era structs embed the earlier ones so
// the schema grows by appending columns, as the dataset's did. timestamp and
// number are DELTA_BINARY_PACKED (they grow by small steps: 9 bytes a row
// less than PLAIN, which keeps the seed preset under 10 GB); other columns are
// PLAIN or dictionary-encoded.
type rowPreLondon struct {
	Timestamp        int64   `parquet:"timestamp,timestamp(microsecond),delta"` // unix µs
	Number           int64   `parquet:"number,delta"`
	Hash             string  `parquet:"hash"`
	ParentHash       string  `parquet:"parent_hash"`
	Nonce            string  `parquet:"nonce"`
	Sha3Uncles       string  `parquet:"sha3_uncles,dict"`
	LogsBloom        string  `parquet:"logs_bloom,dict"`
	TransactionsRoot string  `parquet:"transactions_root"`
	StateRoot        string  `parquet:"state_root"`
	ReceiptsRoot     string  `parquet:"receipts_root"`
	Miner            string  `parquet:"miner,dict"`
	Difficulty       float64 `parquet:"difficulty"`
	TotalDifficulty  float64 `parquet:"total_difficulty"`
	Size             int64   `parquet:"size"`
	ExtraData        string  `parquet:"extra_data,dict"`
	GasLimit         int64   `parquet:"gas_limit"`
	GasUsed          int64   `parquet:"gas_used"`
	TransactionCount int64   `parquet:"transaction_count"`
}

// rowLondon adds the EIP-1559 base fee. It is optional (null) for the
// London day's blocks before the fork block, as in a Spark-written file.
type rowLondon struct {
	rowPreLondon
	BaseFeePerGas *int64 `parquet:"base_fee_per_gas,optional"`
}

// rowShanghai adds the withdrawals root, null before the Shanghai fork on
// the Shanghai day.
type rowShanghai struct {
	rowLondon
	WithdrawalsRoot *string `parquet:"withdrawals_root,optional"`
}

// Schema eras of a day file. A file has one schema: the newest that any of
// its blocks needs.
const (
	eraPreLondon = iota
	eraLondon
	eraShanghai
)

func eraOf(db *chain.Day) int {
	last := db.Headers[len(db.Headers)-1]
	switch {
	case last.WithdrawalsHash != nil:
		return eraShanghai
	case last.BaseFee != nil:
		return eraLondon
	default:
		return eraPreLondon
	}
}

// hexString renders b as 0x-prefixed lowercase hex.
func hexString(b []byte) string {
	buf := make([]byte, 2+2*len(b))
	buf[0], buf[1] = '0', 'x'
	hex.Encode(buf[2:], b)
	return string(buf)
}

var zeroBloomHex = hexString(make([]byte, types.BloomByteLength))

func basicRow(db *chain.Day, i int) rowPreLondon {
	h := db.Headers[i]
	bloom := zeroBloomHex
	if h.Bloom != (types.Bloom{}) {
		bloom = hexString(h.Bloom[:])
	}
	return rowPreLondon{
		Timestamp:        int64(h.Time) * 1_000_000,
		Number:           h.Number.Int64(),
		Hash:             hexString(db.Hashes[i][:]),
		ParentHash:       hexString(h.ParentHash[:]),
		Nonce:            hexString(h.Nonce[:]),
		Sha3Uncles:       hexString(h.UncleHash[:]),
		LogsBloom:        bloom,
		TransactionsRoot: hexString(h.TxHash[:]),
		StateRoot:        hexString(h.Root[:]),
		ReceiptsRoot:     hexString(h.ReceiptHash[:]),
		Miner:            hexString(h.Coinbase[:]),
		Difficulty:       float64(h.Difficulty.Int64()),
		TotalDifficulty:  db.TD[i],
		Size:             db.Size[i],
		ExtraData:        hexString(h.Extra),
		GasLimit:         int64(h.GasLimit),
		GasUsed:          int64(h.GasUsed),
		TransactionCount: db.TxCount[i],
	}
}

func baseFee(h *types.Header) *int64 {
	if h.BaseFee == nil {
		return nil
	}
	return ptr(h.BaseFee.Int64())
}

// rowGroups is how many row groups a day file gets (Spark-written files of
// this size usually have one or two).
const rowGroups = 2

func writeRows[T any](f io.Writer, rows []T) error {
	w := parquet.NewGenericWriter[T](f,
		parquet.NewSchema("spark_schema", parquet.SchemaOf(new(T))),
		parquet.Compression(&parquet.Snappy),
		parquet.CreatedBy("ethstream", "1", "chain"),
	)
	step := (len(rows) + rowGroups - 1) / rowGroups
	for i := 0; i < len(rows); i += step {
		if _, err := w.Write(rows[i:min(i+step, len(rows))]); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return w.Close()
}

// EncodeDay publishes db (a day or any run of blocks of one date) as Parquet
// at dst on fs through durable (Replace: a rerun rewrites identical bytes),
// streaming the rows. The directory is not fsynced here: Generate syncs
// each directory once, before the manifest that vouches for its files.
func EncodeDay(fs vfs.FS, db *chain.Day, dst string) (int64, error) {
	n := len(db.Headers)
	write := func(f io.Writer) error {
		switch eraOf(db) {
		case eraPreLondon:
			rows := make([]rowPreLondon, n)
			for i := range rows {
				rows[i] = basicRow(db, i)
			}
			return writeRows(f, rows)
		case eraLondon:
			rows := make([]rowLondon, n)
			for i := range rows {
				rows[i] = rowLondon{basicRow(db, i), baseFee(db.Headers[i])}
			}
			return writeRows(f, rows)
		default:
			rows := make([]rowShanghai, n)
			for i := range rows {
				var wr *string
				if h := db.Headers[i].WithdrawalsHash; h != nil {
					wr = ptr(hexString(h[:]))
				}
				rows[i] = rowShanghai{rowLondon{basicRow(db, i), baseFee(db.Headers[i])}, wr}
			}
			return writeRows(f, rows)
		}
	}
	res, err := durable.For(fs).Publish(filepath.Dir(dst), filepath.Base(dst),
		durable.Options{Mode: durable.Replace, NoDirSync: true}, write)
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", dst, err)
	}
	return res.Size, nil
}

// fileKey is the archive key of a day: AWS layout, Spark-style part name
// with a uuid derived from seed and date so regeneration is byte-identical.
func fileKey(seed int64, date time.Time) string {
	ds := date.Format(time.DateOnly)
	id := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "ethstream/%d/%s", seed, ds))
	return path.Join(BlocksPrefix, "date="+ds, "part-00000-"+id.String()+"-c000.snappy.parquet")
}

func syncDir(dir string) error { return durable.SyncDir(vfs.Default, dir) }

func ptr[T any](v T) *T { return &v }

// prepareOut creates the output root, checks it is writable, deletes stale
// temp files of a crashed run and refuses Parquet files that this
// generation would not write (another preset or seed), so readers never see
// a mixed archive.
func prepareOut(out string, want map[string]bool) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return errcode.Wrap(err, CodeOutputUnwritable, out, "choose a writable --out directory", "create archive directory")
	}
	probe, err := os.CreateTemp(out, ".probe-*")
	if err != nil {
		return errcode.Wrap(err, CodeOutputUnwritable, out, "choose a writable --out directory", "archive directory is not writable")
	}
	probe.Close()
	os.Remove(probe.Name())
	var foreign []string
	for _, table := range Tables {
		if err := walkTable(out, table, want, &foreign); err != nil {
			return errcode.Wrap(err, CodeOutputUnwritable, out, "choose a writable --out directory", "scan archive directory")
		}
	}
	if len(foreign) > 0 {
		return errcode.New(CodeOutputNotEmpty, out, "use an empty --out directory or delete this one",
			"directory holds %d archive files this generation would not write (e.g. %s)", len(foreign), foreign[0])
	}
	return nil
}

// walkTable deletes a table directory's temp files and adds to foreign
// the files this generation would not write.
func walkTable(out, table string, want map[string]bool, foreign *[]string) error {
	root := filepath.Join(out, filepath.FromSlash(TablePrefix(table)))
	return filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if de.IsDir() {
			return nil
		}
		if strings.HasSuffix(de.Name(), ".tmp") {
			return os.Remove(p)
		}
		rel, _ := filepath.Rel(out, p)
		if !want[filepath.ToSlash(rel)] {
			*foreign = append(*foreign, filepath.ToSlash(rel))
		}
		return nil
	})
}

// Generate writes the preset's days as
// Out/v1.0/eth/blocks/date=YYYY-MM-DD/part-00000-<uuid>-c000.snappy.parquet
// and then Out/manifest.json. Each file is published by rename after fsync,
// the manifest last, so an interrupted run leaves no partial file and no
// manifest; a rerun with the same seed and preset rewrites identical bytes.
//
// Days are built and encoded by Workers goroutines; only the header hashing
// runs in day order, in one goroutine.
func Generate(ctx context.Context, o Options) (*Manifest, error) {
	if o.Preset.Days < 1 {
		return nil, errcode.New(errcode.InvalidArgument, "", "pick a preset with chain.PresetByName", "empty preset")
	}
	g := newGeneration(o)
	if err := g.prepare(); err != nil {
		return nil, err
	}
	m := &Manifest{
		Version: ManifestVersion, Preset: o.Preset.Name, Seed: o.Seed,
		FirstDay: o.Preset.FirstDay.Format(time.DateOnly), Days: g.days,
		FirstBlock: o.Preset.FirstBlock,
	}
	parent := chain.Anchor(o.Seed, m.FirstBlock)
	m.FirstParentHash = parent.Hex()
	files, tables, last, err := g.run(ctx, parent)
	if err != nil {
		return nil, err
	}
	m.Files, m.Tables = files, tables
	for _, f := range files {
		m.Rows += f.Rows
		m.Bytes += f.Bytes
	}
	m.LastBlock = files[g.days-1].LastBlock
	m.LastHash = last.Hash().Hex()
	m.LastTimestamp = int64(last.Time)
	m.LastHeader = last
	dirs := g.dirs
	for _, td := range g.tableDirs {
		dirs = append(dirs, td...)
	}
	if err := syncDirs(dirs); err != nil {
		return nil, err
	}
	if err := writeManifest(o.Out, m); err != nil {
		return nil, err
	}
	return m, nil
}

// generation is one Generate run, in three stages: build days in
// parallel (bounded look-ahead), link and hash them in day order, encode
// them in parallel. Its fields are what the stages share.
type generation struct {
	o       Options
	first   int // the model's index of the preset's first day
	days    int
	workers int

	built    []chan *chain.Day // stage 1 to 2, one per day
	window   chan struct{}     // days in flight, bounds memory
	toEncode chan *chain.Day   // stage 2 to 3
	results  chan encodedDay   // stage 3 to the manifest
	dirs     []string          // each day's date directory, synced before the manifest
	// tableDirs are each day's other tables' date directories.
	tableDirs [][]string
	cancel    context.CancelCauseFunc

	progressMu sync.Mutex
	doneFiles  int
}

// encodedDay is one written file, idx its day's position in the preset.
type encodedDay struct {
	idx    int
	file   ManifestFile
	tables []ManifestFile // one per Options.Tables
}

func newGeneration(o Options) *generation {
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	g := &generation{
		o: o, first: o.Preset.DayIndex(), days: o.Preset.Days, workers: workers,
		window:    make(chan struct{}, 2*workers+2),
		toEncode:  make(chan *chain.Day, workers),
		results:   make(chan encodedDay, o.Preset.Days),
		dirs:      make([]string, o.Preset.Days),
		tableDirs: make([][]string, o.Preset.Days),
	}
	g.built = make([]chan *chain.Day, g.days)
	for i := range g.built {
		g.built[i] = make(chan *chain.Day, 1)
	}
	return g
}

// explainForeign adds to a refusal of files this generation would not write
// what the directory holds, from its manifest: "another preset or seed" was
// wrong where the preset and seed are the same and only the days differ
// (gen-archive --days 2 over the demo archive).
func (g *generation) explainForeign(err error) error {
	var e *errcode.Error
	m, merr := ReadManifest(g.o.Out)
	if !errors.As(err, &e) || e.Code != CodeOutputNotEmpty || merr != nil {
		return err
	}
	days := func(n int) string {
		if n == 1 {
			return "1 day"
		}
		return fmt.Sprintf("%d days", n)
	}
	holds := fmt.Sprintf("it holds the archive of preset %s, seed %d: %s from %s", m.Preset, m.Seed, days(m.Days), m.FirstDay)
	this := fmt.Sprintf("this generation is %s from %s", days(g.days), g.o.Preset.FirstDay.Format(time.DateOnly))
	if m.Seed != g.o.Seed {
		this += fmt.Sprintf(", seed %d", g.o.Seed)
	}
	e.Msg += "; " + holds + ", " + this
	e.Remedy = "generate into another --out directory (or delete this one); the node and the sources read one archive per directory"
	return e
}

// prepare readies the output directory for the preset's files (prepareOut)
// and removes an old manifest, which would vouch for files about to be
// replaced.
func (g *generation) prepare() error {
	want := map[string]bool{}
	for i := 0; i < g.days; i++ {
		want[fileKey(g.o.Seed, g.o.Preset.FirstDay.AddDate(0, 0, i))] = true
		for _, t := range g.o.Tables {
			want[tableKey(g.o.Seed, t, g.o.Preset.FirstDay.AddDate(0, 0, i))] = true
		}
	}
	if err := prepareOut(g.o.Out, want); err != nil {
		return g.explainForeign(err)
	}
	if err := os.Remove(filepath.Join(g.o.Out, ManifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errcode.Wrap(err, CodeOutputUnwritable, g.o.Out, "choose a writable --out directory", "remove old manifest")
	}
	return nil
}

// run starts the builders and encoders, links the days in order from
// parent, and returns the files in day order and the last header. The first
// failure of any stage cancels the others.
func (g *generation) run(ctx context.Context, parent common.Hash) ([]ManifestFile, map[string]ManifestTable, *types.Header, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g.cancel = cancel

	jobs := make(chan int)
	go g.feed(ctx, jobs)
	var wg, ewg sync.WaitGroup
	for w := 0; w < g.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				db := chain.BuildDay(g.o.Seed, g.first+i)
				db.TrimBefore(g.o.Preset.FirstBlock) // a window starting inside its first day
				if len(g.o.Tables) > 0 {
					db.AddBodies(g.o.Seed)
				}
				g.built[i] <- db
			}
		}()
		ewg.Add(1)
		go func() {
			defer ewg.Done()
			for db := range g.toEncode {
				g.encode(db)
			}
		}()
	}
	last, hashErr := g.link(ctx, parent)
	ewg.Wait()
	close(g.results)
	cancel(nil)
	wg.Wait()
	if hashErr != nil {
		return nil, nil, nil, hashErr
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return nil, nil, nil, err
	}
	files := make([]ManifestFile, g.days)
	var tables map[string]ManifestTable
	if len(g.o.Tables) > 0 {
		tables = make(map[string]ManifestTable)
		for _, t := range g.o.Tables {
			tables[t] = ManifestTable{Files: make([]ManifestFile, g.days)}
		}
	}
	done := 0
	for r := range g.results {
		files[r.idx] = r.file
		for k, t := range g.o.Tables {
			mt := tables[t]
			mt.Files[r.idx] = r.tables[k]
			mt.Rows += r.tables[k].Rows
			mt.Bytes += r.tables[k].Bytes
			tables[t] = mt
		}
		done++
	}
	if done != g.days {
		return nil, nil, nil, fmt.Errorf("archive generation stopped after %d of %d files", done, g.days)
	}
	return files, tables, last, nil
}

// feed hands out day positions to the builders, at most cap(window) days
// ahead of the encoders.
func (g *generation) feed(ctx context.Context, jobs chan<- int) {
	defer close(jobs)
	for i := 0; i < g.days; i++ {
		select {
		case g.window <- struct{}{}:
		case <-ctx.Done():
			return
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			return
		}
	}
}

// link takes the built days in day order, links each to its predecessor's
// hash (the one sequential step) and passes it to the encoders. It returns
// a copy of the last header.
func (g *generation) link(ctx context.Context, parent common.Hash) (*types.Header, error) {
	defer close(g.toEncode)
	var last *types.Header
	for i := 0; i < g.days; i++ {
		var db *chain.Day
		select {
		case db = <-g.built[i]:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		parent = db.LinkTo(parent)
		last = types.CopyHeader(db.Headers[len(db.Headers)-1])
		select {
		case g.toEncode <- db:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	return last, nil
}

// encode writes one linked day's file and records it; a failure cancels
// the run. Either way the day leaves the look-ahead window.
func (g *generation) encode(db *chain.Day) {
	defer func() { <-g.window }()
	idx := db.Index() - g.first
	key := fileKey(g.o.Seed, db.Date())
	dst := filepath.Join(g.o.Out, filepath.FromSlash(key))
	g.dirs[idx] = filepath.Dir(dst)
	var size int64
	// New date directories must survive a crash with their files.
	err := durable.EnsureDir(vfs.Default, filepath.Dir(dst))
	if err == nil {
		size, err = EncodeDay(vfs.Default, db, dst)
	}
	if err != nil {
		g.cancel(errcode.Wrap(err, CodeOutputUnwritable, dst, "check free space and permissions of --out", "write archive file"))
		return
	}
	file := ManifestFile{
		Key: key, Date: db.Date().Format(time.DateOnly), Rows: int64(len(db.Headers)), Bytes: size,
		FirstBlock: db.Headers[0].Number.Uint64(), LastBlock: db.Headers[len(db.Headers)-1].Number.Uint64(),
	}
	var tables []ManifestFile
	if len(g.o.Tables) > 0 {
		dsts := make([]string, len(g.o.Tables))
		for k, t := range g.o.Tables {
			tf := file
			tf.Key = tableKey(g.o.Seed, t, db.Date())
			dsts[k] = filepath.Join(g.o.Out, filepath.FromSlash(tf.Key))
			if err := durable.EnsureDir(vfs.Default, filepath.Dir(dsts[k])); err != nil {
				g.cancel(errcode.Wrap(err, CodeOutputUnwritable, dsts[k], "check free space and permissions of --out", "write archive file"))
				return
			}
			g.tableDirs[idx] = append(g.tableDirs[idx], filepath.Dir(dsts[k]))
			tables = append(tables, tf)
		}
		rows, sizes, err := EncodeTables(vfs.Default, g.o.Tables, db, db.Body, dsts)
		if err != nil {
			g.cancel(errcode.Wrap(err, CodeOutputUnwritable, g.o.Out, "check free space and permissions of --out", "write archive file"))
			return
		}
		for k := range tables {
			tables[k].Rows, tables[k].Bytes = rows[k], sizes[k]
		}
	}
	g.results <- encodedDay{idx, file, tables}
	g.progressMu.Lock()
	g.doneFiles++
	if g.o.Progress != nil {
		g.o.Progress(g.doneFiles, g.days)
	}
	g.progressMu.Unlock()
}

// syncDirs fsyncs each distinct directory of dirs once.
func syncDirs(dirs []string) error {
	seen := map[string]bool{}
	for _, dir := range dirs {
		if !seen[dir] {
			seen[dir] = true
			if err := syncDir(dir); err != nil {
				return errcode.Wrap(err, CodeOutputUnwritable, dir, "check --out", "sync directory")
			}
		}
	}
	return nil
}

// WriteManifest publishes m as out/manifest.json crash-safely, after
// checking it as ReadManifest does: an archive extended past its
// generation (ethnode.Extend) keeps a manifest every reader accepts.
func WriteManifest(out string, m *Manifest) error {
	b, err := encodeManifest(m)
	if err != nil {
		return err
	}
	if _, err := parseManifest(b); err != nil {
		// The caller built m: a manifest no reader accepts is its bug,
		// refused before anything is written.
		return errcode.Wrap(err, errcode.Internal, out, "report this as a bug", "the manifest to write is one no reader accepts")
	}
	return publishManifest(out, b)
}

// writeManifest publishes m as out/manifest.json crash-safely.
func writeManifest(out string, m *Manifest) error {
	b, err := encodeManifest(m)
	if err != nil {
		return err
	}
	return publishManifest(out, b)
}

// encodeManifest is manifest.json's bytes: indented JSON and a newline.
func encodeManifest(m *Manifest) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// publishManifest writes b as out/manifest.json crash-safely.
func publishManifest(out string, b []byte) error {
	dst := filepath.Join(out, ManifestName)
	if _, err := durable.Bytes(durable.For(vfs.Default), out, ManifestName, durable.Options{Mode: durable.Replace}, b); err != nil {
		return errcode.Wrap(err, CodeOutputUnwritable, dst, "check free space and permissions of --out", "write manifest")
	}
	return nil
}
