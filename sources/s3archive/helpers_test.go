package s3archive

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// block is the oracle row: what the source must produce for a written row.
type block struct {
	Number     int64
	Hash       string
	ParentHash string
	TS         int64 // µs
	Miner      string
	TxCount    int64
	TxNull     bool
	GasUsed    int64
	GasNull    bool
}

var testMiners = []string{
	"0xea674fdde714fd979de3edf0f56aa9716b898ec8",
	"0x829bd824b016326a401d083b33d092293333a830",
	"0x5a0b54d5dc17e0aadc383d2db43b0a0d3e029c4c",
	"0x1f9090aae28b8a3dceadf281b0f12828e676c326",
	"0x95222290dd7278aa3ddd389cc1e1d165cc4bafe5",
}

func hashOf(n int64) string { return fmt.Sprintf("0x%064x", uint64(n)*0x9e3779b97f4a7c15) }

// genBlocks returns n consecutive blocks starting at first, 12 s apart from day.
func genBlocks(first int64, n int, day time.Time) []block {
	out := make([]block, n)
	for i := range out {
		num := first + int64(i)
		out[i] = block{
			Number: num, Hash: hashOf(num), ParentHash: hashOf(num - 1),
			TS:      day.Add(time.Duration(i) * 12 * time.Second).UnixMicro(),
			Miner:   testMiners[(num*num)%int64(len(testMiners))],
			TxCount: num % 300, GasUsed: num * 1000 % 30_000_000,
		}
	}
	return out
}

// Era row layouts. Each exercises a different physical encoding of the
// projected columns, the way the real dataset's schemas drift.

// eraModern: INT64 micros timestamp, dictionary miner, unprojected wide columns.
type eraModern struct {
	Timestamp        time.Time `parquet:"timestamp,timestamp(microsecond)"`
	Number           int64     `parquet:"number"`
	Hash             string    `parquet:"hash"`
	ParentHash       string    `parquet:"parent_hash"`
	LogsBloom        string    `parquet:"logs_bloom"`
	Miner            string    `parquet:"miner,dict"`
	Difficulty       float64   `parquet:"difficulty"`
	ExtraData        string    `parquet:"extra_data"`
	GasUsed          int64     `parquet:"gas_used"`
	TransactionCount int64     `parquet:"transaction_count"`
	BaseFeePerGas    int64     `parquet:"base_fee_per_gas"`
}

// eraInt96: Spark-style INT96 timestamp, INT32 number, plain miner, no gas_used.
type eraInt96 struct {
	Timestamp        deprecated.Int96 `parquet:"timestamp"`
	Number           int32            `parquet:"number"`
	Hash             string           `parquet:"hash,snappy"`
	ParentHash       string           `parquet:"parent_hash"`
	Miner            string           `parquet:"miner,plain"`
	TransactionCount int64            `parquet:"transaction_count"`
}

// eraDecimal: millisecond timestamp, decimal(0,38) number in 16 bytes,
// binary 32-byte hashes, delta-encoded counts, optional gas_used with nulls.
type eraDecimal struct {
	Timestamp        int64    `parquet:"timestamp,timestamp(millisecond)"`
	Number           [16]byte `parquet:"number,decimal(0:38)"`
	Hash             [32]byte `parquet:"hash"`
	ParentHash       [32]byte `parquet:"parent_hash"`
	Miner            string   `parquet:"miner,dict,zstd"`
	TransactionCount int64    `parquet:"transaction_count,delta"`
	GasUsed          *int64   `parquet:"gas_used,optional"`
}

// eraNanos: nanosecond timestamp, decimal(2,18) int64 number (scaled by 100),
// dictionary hashes, optional miner-independent columns in another order.
type eraNanos struct {
	GasUsed          *int64 `parquet:"gas_used,optional,dict"`
	Miner            string `parquet:"miner,dict"`
	Timestamp        int64  `parquet:"timestamp,timestamp(nanosecond)"`
	ParentHash       string `parquet:"parent_hash,dict"`
	Hash             string `parquet:"hash,dict"`
	Number           int64  `parquet:"number,decimal(2:18)"`
	TransactionCount *int64 `parquet:"transaction_count,optional"`
}

// eraSeconds: an unannotated INT64 timestamp in seconds (inferred).
type eraSeconds struct {
	Number           int64  `parquet:"number"`
	Timestamp        int64  `parquet:"timestamp"`
	Hash             string `parquet:"hash"`
	ParentHash       string `parquet:"parent_hash"`
	Miner            string `parquet:"miner"`
	TransactionCount int64  `parquet:"transaction_count"`
	GasUsed          int64  `parquet:"gas_used"`
}

// eraSpark: every column optional, as Spark writes nullable columns (the real
// dataset), with no nulls at all; INT96 timestamp.
type eraSpark struct {
	Timestamp        *deprecated.Int96 `parquet:"timestamp,optional"`
	Number           *int64            `parquet:"number,optional"`
	Hash             *string           `parquet:"hash,optional"`
	ParentHash       *string           `parquet:"parent_hash,optional"`
	Miner            *string           `parquet:"miner,optional,dict"`
	GasUsed          *int64            `parquet:"gas_used,optional"`
	TransactionCount *int64            `parquet:"transaction_count,optional"`
}

var eras = []string{"modern", "int96", "decimal", "nanos", "seconds", "spark"}

func toInt96(us int64) deprecated.Int96 {
	day := us / 86_400_000_000
	nanos := uint64(us%86_400_000_000) * 1000
	return deprecated.Int96{uint32(nanos), uint32(nanos >> 32), uint32(day + 2440588)} // the Julian day of 1970-01-01
}

func hex32(s string) (b [32]byte) {
	d, err := hex.DecodeString(s[2:])
	if err != nil || len(d) != 32 {
		panic(fmt.Sprintf("bad hash %q: %v", s, err))
	}
	copy(b[:], d)
	return b
}

func dec16(n int64) (b [16]byte) {
	for i := 15; i >= 8; i-- {
		b[i] = byte(n)
		n >>= 8
	}
	return b
}

// expected returns what the source produces for blocks written as era.
func expected(era string, blocks []block) []block {
	out := append([]block(nil), blocks...)
	for i := range out {
		b := &out[i]
		switch era {
		case "int96":
			b.GasUsed, b.GasNull = 0, true
		case "decimal":
			if b.Number%3 == 0 {
				b.GasUsed, b.GasNull = 0, true
			}
			b.TS = b.TS / 1000 * 1000
		case "nanos":
			if b.Number%4 == 0 {
				b.GasUsed, b.GasNull = 0, true
			}
			if b.Number%5 == 0 {
				b.TxCount, b.TxNull = 0, true
			}
		case "seconds":
			b.TS = b.TS / 1e6 * 1e6
		}
	}
	return out
}

func writeRows[T any](t testing.TB, path string, rows []T, opts ...parquet.WriterOption) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f, opts...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeEra writes blocks to path in the layout of era.
func writeEra(t testing.TB, path, era string, blocks []block, opts ...parquet.WriterOption) {
	t.Helper()
	switch era {
	case "modern":
		rows := make([]eraModern, len(blocks))
		for i, b := range blocks {
			rows[i] = eraModern{Timestamp: time.UnixMicro(b.TS).UTC(), Number: b.Number, Hash: b.Hash, ParentHash: b.ParentHash,
				LogsBloom: fmt.Sprintf("0x%0512x", b.Number*31), Miner: b.Miner, Difficulty: float64(b.Number) * 1e12,
				ExtraData: fmt.Sprintf("0x%x", b.Number), GasUsed: b.GasUsed, TransactionCount: b.TxCount, BaseFeePerGas: 7}
		}
		writeRows(t, path, rows, opts...)
	case "int96":
		rows := make([]eraInt96, len(blocks))
		for i, b := range blocks {
			rows[i] = eraInt96{Timestamp: toInt96(b.TS), Number: int32(b.Number), Hash: b.Hash, ParentHash: b.ParentHash,
				Miner: b.Miner, TransactionCount: b.TxCount}
		}
		writeRows(t, path, rows, opts...)
	case "decimal":
		rows := make([]eraDecimal, len(blocks))
		for i, b := range blocks {
			r := eraDecimal{Timestamp: b.TS / 1000, Number: dec16(b.Number), Hash: hex32(b.Hash), ParentHash: hex32(b.ParentHash),
				Miner: b.Miner, TransactionCount: b.TxCount}
			if b.Number%3 != 0 {
				g := b.GasUsed
				r.GasUsed = &g
			}
			rows[i] = r
		}
		writeRows(t, path, rows, opts...)
	case "nanos":
		rows := make([]eraNanos, len(blocks))
		for i, b := range blocks {
			r := eraNanos{Timestamp: b.TS * 1000, Number: b.Number * 100, Hash: b.Hash, ParentHash: b.ParentHash, Miner: b.Miner}
			if b.Number%4 != 0 {
				g := b.GasUsed
				r.GasUsed = &g
			}
			if b.Number%5 != 0 {
				c := b.TxCount
				r.TransactionCount = &c
			}
			rows[i] = r
		}
		writeRows(t, path, rows, opts...)
	case "seconds":
		rows := make([]eraSeconds, len(blocks))
		for i, b := range blocks {
			rows[i] = eraSeconds{Number: b.Number, Timestamp: b.TS / 1e6, Hash: b.Hash, ParentHash: b.ParentHash,
				Miner: b.Miner, TransactionCount: b.TxCount, GasUsed: b.GasUsed}
		}
		writeRows(t, path, rows, opts...)
	case "spark":
		rows := make([]eraSpark, len(blocks))
		for i, b := range blocks {
			ts := toInt96(b.TS)
			rows[i] = eraSpark{Timestamp: &ts, Number: &b.Number, Hash: &b.Hash, ParentHash: &b.ParentHash,
				Miner: &b.Miner, GasUsed: &b.GasUsed, TransactionCount: &b.TxCount}
		}
		writeRows(t, path, rows, opts...)
	default:
		t.Fatalf("unknown era %q", era)
	}
}

// dayPath returns the archive path of file part of day d under root.
func dayPath(root string, d time.Time, part int) string {
	return filepath.Join(root, "v1.0", "eth", "blocks", "date="+d.Format("2006-01-02"),
		fmt.Sprintf("part-%05d-0b3c5a1e-c000.snappy.parquet", part))
}

var day0 = time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)

// writeDays writes days daily files of perDay blocks each, all in era, and
// returns the oracle rows in admission order.
func writeDays(t testing.TB, root string, first time.Time, days, perDay int, era string) []block {
	t.Helper()
	var all []block
	for d := range days {
		day := first.AddDate(0, 0, d)
		bs := genBlocks(int64(1_000_000+d*perDay), perDay, day)
		writeEra(t, dayPath(root, day, 0), era, bs)
		all = append(all, expected(era, bs)...)
	}
	return all
}

// env returns a SourceEnv over fs with the given projection.
func testEnv(t testing.TB, fs vfs.FS, cols ...string) stream.SourceEnv {
	t.Helper()
	dir := "/ckpt/sources/s3_backfill"
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if len(cols) == 0 {
		cols = ethblock.Columns
	}
	return stream.SourceEnv{Name: "s3_backfill", MetadataDir: dir, FS: fs, Columns: cols, Clock: stream.SystemClock{}}
}

func openSource(t testing.TB, o Options, env stream.SourceEnv) *Source {
	t.Helper()
	s, err := New(withBlocks(o))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	return s
}

// collect reads (start, end] and returns the rows as blocks (absent columns zero).
func collect(t testing.TB, s *Source, start, end stream.Offset) []block {
	t.Helper()
	out, err := tryCollect(s, start, end)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tryCollect(s *Source, start, end stream.Offset) ([]block, error) {
	var out []block
	err := s.ReadBatch(context.Background(), start, end, func(b *stream.Batch) error {
		if err := b.Validate(); err != nil {
			return err
		}
		out = append(out, batchRows(b)...)
		return nil
	})
	return out, err
}

// batchRows returns the oracle rows of a decoded batch.
func batchRows(b *stream.Batch) []block {
	rows := make([]block, b.Len)
	for _, c := range b.Columns {
		for i := range rows {
			r := &rows[i]
			null := c.IsNull(i)
			switch c.Name {
			case ethblock.ColNumber:
				r.Number = c.Int64s[i]
			case ethblock.ColHash:
				r.Hash = c.Strings[i]
			case ethblock.ColParentHash:
				r.ParentHash = c.Strings[i]
			case ethblock.ColBlockTS:
				r.TS = c.Int64s[i]
			case ethblock.ColMiner:
				r.Miner = c.Strings[i]
			case ethblock.ColTransactionCount:
				r.TxCount, r.TxNull = c.Int64s[i], null
			case ethblock.ColGasUsed:
				r.GasUsed, r.GasNull = c.Int64s[i], null
			}
		}
	}
	return rows
}

func off(n int64) stream.Offset { return formatOffset(n) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// blockColumns is the blocks table's schema as the pipeline configures it
// (pipeline.BlockArchiveColumns, which this package's tests cannot import).
func blockColumns() []Column {
	cols := make([]Column, len(ethblock.Schema))
	for i, c := range ethblock.Schema {
		cols[i] = Column{Name: c.Name, Type: c.Type, Nullable: c.Nullable, File: c.Archive, Required: c.Required, Repeats: c.Repeats}
	}
	return cols
}

// blockCols is the projection names of the block schema.
func blockCols(names []string) []Column {
	cols, err := projectColumns(blockColumns(), names)
	if err != nil {
		panic(err)
	}
	return cols
}

// withBlocks is o reading the block schema.
func withBlocks(o Options) Options {
	o.Columns = blockColumns()
	return o
}
