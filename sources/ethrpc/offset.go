package ethrpc

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Offset is the source's position: the last block included and its hash.
// Its JSON is {"block":N,"hash":"0x…"} with a lowercase hash, so equal
// positions render byte-identically. With reorg=retract, the end offset of a
// batch that retracts blocks adds "fork":A, the common ancestor: the batch
// takes back the blocks above A it had emitted and inserts A+1 .. Block of
// the chain ending at Hash.
type Offset struct {
	Block uint64 `json:"block"`
	Hash  string `json:"hash"`
	// Fork is the common ancestor of a retracting batch (HasFork set).
	Fork    uint64 `json:"fork,omitempty"`
	HasFork bool   `json:"-"`
}

// JSON renders the canonical compact form.
func (o Offset) JSON() stream.Offset {
	b := make([]byte, 0, 100)
	b = append(b, `{"block":`...)
	b = strconv.AppendUint(b, o.Block, 10)
	b = append(b, `,"hash":`...)
	b = strconv.AppendQuote(b, o.Hash)
	if o.HasFork {
		b = append(b, `,"fork":`...)
		b = strconv.AppendUint(b, o.Fork, 10)
	}
	b = append(b, '}')
	return b
}

// ParseOffset decodes an offset written by this source. A nil or empty
// offset returns ok=false. A malformed one is CHECKPOINT_CORRUPT, because
// offsets only come from the checkpoint's logs.
func ParseOffset(raw stream.Offset) (o Offset, ok bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return Offset{}, false, nil
	}
	var v struct {
		Block *uint64 `json:"block"`
		Hash  *string `json:"hash"`
		Fork  *uint64 `json:"fork"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return Offset{}, false, errcode.Corrupt("", err, "parse ethrpc offset %q", raw)
	}
	if v.Block == nil || v.Hash == nil {
		return Offset{}, false, errcode.Corrupt("", nil, "ethrpc offset %q lacks block or hash", raw)
	}
	h, err := normHex(*v.Hash, 32)
	if err != nil {
		return Offset{}, false, errcode.Corrupt("", err, "ethrpc offset %q", raw)
	}
	o = Offset{Block: *v.Block, Hash: h}
	if v.Fork != nil {
		if *v.Fork > o.Block {
			return Offset{}, false, errcode.Corrupt("", nil, "ethrpc offset %q has its fork above its block", raw)
		}
		o.Fork, o.HasFork = *v.Fork, true
	}
	return o, true, nil
}

func (o Offset) String() string { return fmt.Sprintf("block %d (%s)", o.Block, o.Hash) }
