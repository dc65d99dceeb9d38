package ethrpc

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
)

// historyVersion is the version of the history file format this source
// writes (doc.go, "Retracting reorganisations"). Version 1 recorded the
// seven columns of ethblock.Core; version 2 records every block column.
// Both are read.
const historyVersion = 2

// historyPrefix and historySuffix frame a history file's name:
// history.<block>.<hash>.json, the end offset the file belongs to.
const (
	historyPrefix = "history."
	historySuffix = ".json"
)

// history is the chain the source emitted up to one end offset: its last
// blocks (at most reorgDepth+1), oldest first, contiguous and linked by
// parent hash, with every column value as emitted, so that a retraction
// repeats them exactly.
type history struct {
	blocks []blockRow
}

func (h *history) first() uint64  { return uint64(h.blocks[0].Number) }
func (h *history) last() blockRow { return h.blocks[len(h.blocks)-1] }

// at returns the block with number n, if the history holds it.
func (h *history) at(n uint64) (blockRow, bool) {
	if len(h.blocks) == 0 || n < h.first() || n > uint64(h.last().Number) {
		return blockRow{}, false
	}
	return h.blocks[n-h.first()], true
}

// upTo returns the history truncated after block n (n must be held).
func (h *history) upTo(n uint64) *history {
	return &history{blocks: h.blocks[: n-h.first()+1 : n-h.first()+1]}
}

// extend returns the history followed by rows (contiguous with it, or long
// enough to replace it), keeping the newest keep blocks.
func (h *history) extend(rows []blockRow, keep int) *history {
	var all []blockRow
	if len(rows) == 0 || len(h.blocks) > 0 && uint64(rows[0].Number) == uint64(h.last().Number)+1 {
		all = append(append(all, h.blocks...), rows...)
	} else {
		all = append(all, rows...)
	}
	if len(all) > keep {
		all = all[len(all)-keep:]
	}
	return &history{blocks: all}
}

// historyName is the file name of the history ending at o.
func historyName(o Offset) string {
	return historyPrefix + strconv.FormatUint(o.Block, 10) + "." + o.Hash + historySuffix
}

// encode renders the history as byte-stable compact JSON: fields in the
// documented order, integers in decimal, doubles in Go's shortest
// round-trip form, hashes lowercase, nulls as null. A row carried over from
// a version-1 history (not Full) has the seven version-1 fields only.
func (h *history) encode() []byte {
	b := make([]byte, 0, 64+len(h.blocks)*1100)
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, historyVersion, 10)
	b = append(b, `,"blocks":[`...)
	for i, r := range h.blocks {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.appendJSON(b)
	}
	return append(b, "]}\n"...)
}

// appendJSON appends r as one history block object.
func (r *blockRow) appendJSON(b []byte) []byte {
	str := func(name, v string) {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		b = strconv.AppendQuote(b, v)
	}
	num := func(name string, v int64) {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, v, 10)
	}
	b = append(b, `{"number":`...)
	b = strconv.AppendInt(b, r.Number, 10)
	str("hash", r.Hash)
	str("parent_hash", r.ParentHash)
	num("block_ts", r.BlockTS)
	str("miner", r.Miner)
	num("transaction_count", r.TransactionCount)
	num("gas_used", r.GasUsed)
	if r.Full {
		str("nonce", r.Nonce)
		str("sha3_uncles", r.Sha3Uncles)
		str("logs_bloom", r.LogsBloom)
		str("transactions_root", r.TransactionsRoot)
		str("state_root", r.StateRoot)
		str("receipts_root", r.ReceiptsRoot)
		b = append(b, `,"difficulty":`...)
		b = strconv.AppendFloat(b, r.Difficulty, 'g', -1, 64)
		b = append(b, `,"total_difficulty":`...)
		if r.HasTotalDifficulty {
			b = strconv.AppendFloat(b, r.TotalDifficulty, 'g', -1, 64)
		} else {
			b = append(b, "null"...)
		}
		num("size", r.Size)
		str("extra_data", r.ExtraData)
		num("gas_limit", r.GasLimit)
		if r.HasBaseFee {
			num("base_fee_per_gas", r.BaseFeePerGas)
		} else {
			b = append(b, `,"base_fee_per_gas":null`...)
		}
		if r.HasWithdrawalsRoot {
			str("withdrawals_root", r.WithdrawalsRoot)
		} else {
			b = append(b, `,"withdrawals_root":null`...)
		}
	}
	return append(b, '}')
}

// field is a history value whose presence is known apart from its nullness.
type field[T any] struct {
	Set  bool // the key is present
	Null bool // its value is null
	V    T
}

// UnmarshalJSON implements json.Unmarshaler (encoding/json calls it for
// null too, so a present null is told apart from a missing key).
func (f *field[T]) UnmarshalJSON(data []byte) error {
	f.Set = true
	if string(data) == "null" {
		f.Null = true
		return nil
	}
	return json.Unmarshal(data, &f.V)
}

// historyBlockJSON is the decoding shape of one block.
type historyBlockJSON struct {
	Number           field[int64]  `json:"number"`
	Hash             field[string] `json:"hash"`
	ParentHash       field[string] `json:"parent_hash"`
	BlockTS          field[int64]  `json:"block_ts"`
	Miner            field[string] `json:"miner"`
	TransactionCount field[int64]  `json:"transaction_count"`
	GasUsed          field[int64]  `json:"gas_used"`

	Nonce            field[string]  `json:"nonce"`
	Sha3Uncles       field[string]  `json:"sha3_uncles"`
	LogsBloom        field[string]  `json:"logs_bloom"`
	TransactionsRoot field[string]  `json:"transactions_root"`
	StateRoot        field[string]  `json:"state_root"`
	ReceiptsRoot     field[string]  `json:"receipts_root"`
	Difficulty       field[float64] `json:"difficulty"`
	TotalDifficulty  field[float64] `json:"total_difficulty"`
	Size             field[int64]   `json:"size"`
	ExtraData        field[string]  `json:"extra_data"`
	GasLimit         field[int64]   `json:"gas_limit"`
	BaseFeePerGas    field[int64]   `json:"base_fee_per_gas"`
	WithdrawalsRoot  field[string]  `json:"withdrawals_root"`
}

// historyJSON is the decoding shape of a history file.
type historyJSON struct {
	Version *int               `json:"version"`
	Blocks  []historyBlockJSON `json:"blocks"`
}

// parseHistory decodes a history file and checks everything the source
// relies on: the version, every field present and well formed, at most
// maxBlocks blocks, contiguous numbers linked by parent hash, and (when end
// is given) a last block equal to end. Errors are plain; the caller adds
// the path.
func parseHistory(data []byte, maxBlocks int, end *Offset) (*history, error) {
	var v historyJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the history object")
	}
	if v.Version == nil {
		return nil, errors.New("no version")
	}
	if *v.Version != 1 && *v.Version != historyVersion {
		return nil, fmt.Errorf("version %d, this ethstream reads versions 1 and %d", *v.Version, historyVersion)
	}
	if len(v.Blocks) == 0 || len(v.Blocks) > maxBlocks {
		return nil, fmt.Errorf("%d blocks, want 1 to %d", len(v.Blocks), maxBlocks)
	}
	h := &history{blocks: make([]blockRow, len(v.Blocks))}
	for i := range v.Blocks {
		r, err := v.Blocks[i].row(*v.Version)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", i, err)
		}
		if i > 0 {
			p := h.blocks[i-1]
			if r.Number != p.Number+1 || r.ParentHash != p.Hash {
				return nil, fmt.Errorf("block %d does not follow block %d (%s)", r.Number, p.Number, p.Hash)
			}
		}
		h.blocks[i] = r
	}
	if end != nil {
		if l := h.last(); uint64(l.Number) != end.Block || l.Hash != end.Hash {
			return nil, fmt.Errorf("ends at block %d (%s), not at %s", l.Number, l.Hash, end)
		}
	}
	return h, nil
}

// row checks one block of a file of the given version and converts it.
// Version 1 blocks have the seven version-1 fields; version 2 blocks have
// those and either all the others (nulls only where a column is nullable)
// or none (a block carried over from a version-1 history).
func (b *historyBlockJSON) row(version int) (blockRow, error) {
	core := []bool{b.Number.Set && !b.Number.Null, b.Hash.Set && !b.Hash.Null, b.ParentHash.Set && !b.ParentHash.Null,
		b.BlockTS.Set && !b.BlockTS.Null, b.Miner.Set && !b.Miner.Null,
		b.TransactionCount.Set && !b.TransactionCount.Null, b.GasUsed.Set && !b.GasUsed.Null}
	for _, ok := range core {
		if !ok {
			return blockRow{}, errors.New("missing field")
		}
	}
	r := blockRow{Number: b.Number.V, BlockTS: b.BlockTS.V, TransactionCount: b.TransactionCount.V, GasUsed: b.GasUsed.V}
	if r.Number < 0 || r.BlockTS < 0 || r.TransactionCount < 0 || r.GasUsed < 0 {
		return blockRow{}, errors.New("negative value")
	}
	hexes := []hexField{{"hash", b.Hash, 32, &r.Hash}, {"parent_hash", b.ParentHash, 32, &r.ParentHash}, {"miner", b.Miner, 20, &r.Miner}}
	if err := checkHexes(r.Number, hexes); err != nil {
		return blockRow{}, err
	}
	ext := []bool{b.Nonce.Set, b.Sha3Uncles.Set, b.LogsBloom.Set, b.TransactionsRoot.Set, b.StateRoot.Set, b.ReceiptsRoot.Set,
		b.Difficulty.Set, b.TotalDifficulty.Set, b.Size.Set, b.ExtraData.Set, b.GasLimit.Set, b.BaseFeePerGas.Set, b.WithdrawalsRoot.Set}
	n := 0
	for _, set := range ext {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return r, nil
	case version == 1:
		return blockRow{}, fmt.Errorf("block %d: version 1 has no field beyond gas_used", r.Number)
	case n != len(ext):
		return blockRow{}, fmt.Errorf("block %d: missing field", r.Number)
	}
	return r, b.ext(&r)
}

// ext checks and converts the fields beyond the seven into r.
func (b *historyBlockJSON) ext(r *blockRow) error {
	if b.Nonce.Null || b.Sha3Uncles.Null || b.LogsBloom.Null || b.TransactionsRoot.Null || b.StateRoot.Null ||
		b.ReceiptsRoot.Null || b.Difficulty.Null || b.Size.Null || b.ExtraData.Null || b.GasLimit.Null {
		return fmt.Errorf("block %d: null in a non-nullable field", r.Number)
	}
	hexes := []hexField{
		{"nonce", b.Nonce, 8, &r.Nonce}, {"sha3_uncles", b.Sha3Uncles, 32, &r.Sha3Uncles},
		{"logs_bloom", b.LogsBloom, 256, &r.LogsBloom}, {"transactions_root", b.TransactionsRoot, 32, &r.TransactionsRoot},
		{"state_root", b.StateRoot, 32, &r.StateRoot}, {"receipts_root", b.ReceiptsRoot, 32, &r.ReceiptsRoot},
	}
	if ed := b.ExtraData.V; len(ed) >= 2 && len(ed)%2 == 0 {
		hexes = append(hexes, hexField{"extra_data", b.ExtraData, len(ed)/2 - 1, &r.ExtraData})
	} else {
		return fmt.Errorf("block %d: extra_data %q is not 0x-hex bytes", r.Number, ed)
	}
	if !b.WithdrawalsRoot.Null {
		hexes = append(hexes, hexField{"withdrawals_root", b.WithdrawalsRoot, 32, &r.WithdrawalsRoot})
		r.HasWithdrawalsRoot = true
	}
	if err := checkHexes(r.Number, hexes); err != nil {
		return err
	}
	r.Difficulty, r.Size, r.GasLimit = b.Difficulty.V, b.Size.V, b.GasLimit.V
	r.TotalDifficulty, r.HasTotalDifficulty = b.TotalDifficulty.V, !b.TotalDifficulty.Null
	r.BaseFeePerGas, r.HasBaseFee = b.BaseFeePerGas.V, !b.BaseFeePerGas.Null
	if r.Difficulty < 0 || r.TotalDifficulty < 0 || r.Size < 0 || r.GasLimit < 0 || r.BaseFeePerGas < 0 {
		return fmt.Errorf("block %d: negative value", r.Number)
	}
	r.Full = true
	return nil
}

// hexField is a hex string of a history block, of size bytes, bound for dst.
type hexField struct {
	name string
	in   field[string]
	size int
	dst  *string
}

// checkHexes checks each hex field's width and that it is stored
// lowercase (else the file is not byte-stable), and stores it.
func checkHexes(num int64, hexes []hexField) error {
	for _, h := range hexes {
		v, err := hashField(h.name, &h.in.V, h.size)
		if err != nil {
			return fmt.Errorf("block %d: %w", num, err)
		}
		if v != h.in.V {
			return fmt.Errorf("block %d: hashes must be lowercase", num)
		}
		*h.dst = v
	}
	return nil
}

// historyCodec is the checkpoint.Log codec of the history files, keyed by
// the end offset they belong to (doc.go, "Retracting reorganisations"):
// history.<block>.<hash>.json, ordered by block, then hash.
type historyCodec struct{}

// Name returns history.<block>.<hash>.json.
func (historyCodec) Name(o Offset) string { return historyName(o) }

// Key parses history.<block>.<hash>.json.
func (historyCodec) Key(name string) (Offset, bool) {
	mid, okPrefix := strings.CutPrefix(name, historyPrefix)
	mid, okSuffix := strings.CutSuffix(mid, historySuffix)
	block, hash, ok := strings.Cut(mid, ".")
	n, err := strconv.ParseUint(block, 10, 64)
	if !okPrefix || !okSuffix || !ok || err != nil || hash == "" || strconv.FormatUint(n, 10) != block {
		return Offset{}, false
	}
	return Offset{Block: n, Hash: hash}, true
}

// Compare orders end offsets by block, then hash.
func (historyCodec) Compare(a, b Offset) int {
	return cmp.Or(cmp.Compare(a.Block, b.Block), strings.Compare(a.Hash, b.Hash))
}

// Encode renders h (history.encode).
func (historyCodec) Encode(_ Offset, h *history) ([]byte, error) { return h.encode(), nil }

// Decode parses the history ending at o. A file written with a larger
// reorgDepth is still read whole: its blocks were emitted, and the next
// history is trimmed to the new depth.
func (historyCodec) Decode(path string, o Offset, data []byte) (*history, error) {
	h, err := parseHistory(data, MaxReorgDepth+1, &o)
	if err != nil {
		return nil, errcode.Corrupt(path, err, "ethrpc source history")
	}
	return h, nil
}

// historyLog is the source's history files in its MetadataDir, which it
// shares with nothing else of ours but may hold other names (ignored).
type historyLog struct {
	fs  vfs.FS
	dir string
}

func (l *historyLog) log() checkpoint.Log[Offset, *history] {
	return checkpoint.Log[Offset, *history]{FS: l.fs, Dir: l.dir, Codec: historyCodec{}, What: "ethrpc source history"}
}

func (l *historyLog) path(o Offset) string { return l.log().Path(o) }

// load reads the history ending at o; ok is false when there is none.
func (l *historyLog) load(o Offset) (*history, bool, error) {
	h, err := l.log().Get(o)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	return h, err == nil, err
}

// publish writes the history ending at o, once: a file already there (the
// same batch planned again after a crash) must hold the same bytes, since
// blocks never change under their hash.
// A version-1 file already there (written by an ethstream before version
// 2, for the same planned batch) is kept when it holds the same blocks:
// its rows lack only columns that readRetract completes by hash.
func (l *historyLog) publish(o Offset, h *history) error {
	if old, ok, err := l.load(o); err == nil && ok && old.sameCore(h) {
		return nil
	}
	return l.log().AddOrMatch(o, h)
}

// sameCore reports whether h holds the blocks of other, and is a history
// read from a version-1 file (some row not Full).
func (h *history) sameCore(other *history) bool {
	if len(h.blocks) != len(other.blocks) {
		return false
	}
	partial := false
	for i, r := range h.blocks {
		o := other.blocks[i]
		if r.Number != o.Number || r.Hash != o.Hash || r.ParentHash != o.ParentHash || r.BlockTS != o.BlockTS ||
			r.Miner != o.Miner || r.TransactionCount != o.TransactionCount || r.GasUsed != o.GasUsed {
			return false
		}
		partial = partial || !r.Full
	}
	return partial
}

// prune deletes every history file but the one ending at keep: after a
// commit no batch can start anywhere else.
func (l *historyLog) prune(keep Offset) error {
	c := historyCodec{}
	_, err := l.log().PurgeIf(func(o Offset) bool { return c.Compare(o, keep) != 0 })
	return err
}

// IsHistoryDir reports whether dir (a source's sources/<key>/) holds at
// least one history file: it is an ethrpc source's directory.
func IsHistoryDir(fs vfs.FS, dir string) bool {
	names, err := fs.List(dir)
	if err != nil {
		return false
	}
	for _, n := range names {
		if _, ok := (historyCodec{}).Key(n); ok {
			return true
		}
	}
	return false
}

// VerifyHistory reads every history file in dir in full, as a restart
// would (version, fields, contiguity, the end offset its name gives), for
// `checkpoint verify`. It writes nothing and goes on past damage: it returns
// each file's path and its error (nil: intact); err is for a directory it
// cannot list.
func VerifyHistory(fs vfs.FS, dir string) (paths []string, errs []error, err error) {
	l := (&historyLog{fs: fs, dir: dir}).log()
	keys, err := l.List()
	if err != nil {
		return nil, nil, err
	}
	for _, k := range keys {
		_, err := l.Get(k)
		paths, errs = append(paths, l.Path(k)), append(errs, err)
	}
	return paths, errs, nil
}
