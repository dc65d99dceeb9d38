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

// historyVersion is the version of the history file format (doc.go,
// "Retracting reorganisations").
const historyVersion = 1

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
// documented order, integers in decimal, hashes lowercase.
func (h *history) encode() []byte {
	b := make([]byte, 0, 64+len(h.blocks)*260)
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, historyVersion, 10)
	b = append(b, `,"blocks":[`...)
	for i, r := range h.blocks {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"number":`...)
		b = strconv.AppendInt(b, r.Number, 10)
		b = append(b, `,"hash":`...)
		b = strconv.AppendQuote(b, r.Hash)
		b = append(b, `,"parent_hash":`...)
		b = strconv.AppendQuote(b, r.ParentHash)
		b = append(b, `,"block_ts":`...)
		b = strconv.AppendInt(b, r.BlockTS, 10)
		b = append(b, `,"miner":`...)
		b = strconv.AppendQuote(b, r.Miner)
		b = append(b, `,"transaction_count":`...)
		b = strconv.AppendInt(b, r.TransactionCount, 10)
		b = append(b, `,"gas_used":`...)
		b = strconv.AppendInt(b, r.GasUsed, 10)
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

// historyJSON is the decoding shape; pointers detect missing fields.
type historyJSON struct {
	Version *int `json:"version"`
	Blocks  []struct {
		Number           *int64  `json:"number"`
		Hash             *string `json:"hash"`
		ParentHash       *string `json:"parent_hash"`
		BlockTS          *int64  `json:"block_ts"`
		Miner            *string `json:"miner"`
		TransactionCount *int64  `json:"transaction_count"`
		GasUsed          *int64  `json:"gas_used"`
	} `json:"blocks"`
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
	if *v.Version != historyVersion {
		return nil, fmt.Errorf("version %d, this ethstream reads version %d", *v.Version, historyVersion)
	}
	if len(v.Blocks) == 0 || len(v.Blocks) > maxBlocks {
		return nil, fmt.Errorf("%d blocks, want 1 to %d", len(v.Blocks), maxBlocks)
	}
	h := &history{blocks: make([]blockRow, len(v.Blocks))}
	for i, b := range v.Blocks {
		if b.Number == nil || b.Hash == nil || b.ParentHash == nil || b.BlockTS == nil || b.Miner == nil ||
			b.TransactionCount == nil || b.GasUsed == nil {
			return nil, fmt.Errorf("block %d: missing field", i)
		}
		r := blockRow{Number: *b.Number, BlockTS: *b.BlockTS, TransactionCount: *b.TransactionCount, GasUsed: *b.GasUsed}
		if r.Number < 0 || r.BlockTS < 0 || r.TransactionCount < 0 || r.GasUsed < 0 {
			return nil, fmt.Errorf("block %d: negative value", i)
		}
		var err error
		if r.Hash, err = hashField("hash", b.Hash, 32); err == nil {
			if r.ParentHash, err = hashField("parent_hash", b.ParentHash, 32); err == nil {
				r.Miner, err = hashField("miner", b.Miner, 20)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", r.Number, err)
		}
		// Hashes must be stored lowercase, or the file is not byte-stable.
		if r.Hash != *b.Hash || r.ParentHash != *b.ParentHash || r.Miner != *b.Miner {
			return nil, fmt.Errorf("block %d: hashes must be lowercase", r.Number)
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
func (l *historyLog) publish(o Offset, h *history) error { return l.log().AddOrMatch(o, h) }

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
