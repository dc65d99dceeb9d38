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
// positions render byte-identically.
type Offset struct {
	Block uint64 `json:"block"`
	Hash  string `json:"hash"`
}

// JSON renders the canonical compact form.
func (o Offset) JSON() stream.Offset {
	b := make([]byte, 0, 100)
	b = append(b, `{"block":`...)
	b = strconv.AppendUint(b, o.Block, 10)
	b = append(b, `,"hash":`...)
	b = strconv.AppendQuote(b, o.Hash)
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
	return Offset{Block: *v.Block, Hash: h}, true, nil
}

func (o Offset) String() string { return fmt.Sprintf("block %d (%s)", o.Block, o.Hash) }
