package ethrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

// blockRow is one block's values as the engine's block columns hold them.
type blockRow struct {
	Number           int64
	Hash             string // 0x-hex, lowercase
	ParentHash       string // 0x-hex, lowercase
	BlockTS          int64  // µs since the Unix epoch, UTC
	Miner            string // 0x-hex, lowercase
	TransactionCount int64
	GasUsed          int64
}

// errBlockNotFound is a null result: the endpoint does not (yet) have the
// block, e.g. a load-balanced replica lagging behind the one that served
// eth_blockNumber. Callers retry it.
var errBlockNotFound = errors.New("block not found (null result)")

// rpcBlock is the subset of eth_getBlockByNumber's result the source reads.
// Fields are raw strings so that every check is ours and explicit.
type rpcBlock struct {
	Number       *string  `json:"number"`
	Hash         *string  `json:"hash"`
	ParentHash   *string  `json:"parentHash"`
	Timestamp    *string  `json:"timestamp"`
	Miner        *string  `json:"miner"`
	GasUsed      *string  `json:"gasUsed"`
	Transactions *txCount `json:"transactions"`
}

// txCount counts the elements of the transactions array (hashes, or objects
// when hydrated) without materialising them: a mainnet block lists ~200.
type txCount int64

// UnmarshalJSON counts the top-level elements of a JSON array. encoding/json
// has validated data before calling it, so a small scanner that tracks
// strings and nesting is exact.
func (c *txCount) UnmarshalJSON(data []byte) error {
	if len(data) == 0 || data[0] != '[' {
		return fmt.Errorf("transactions is not an array")
	}
	var n int64
	depth, inStr, esc, empty := 0, false, false, true
	for _, ch := range data[1:] {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case ch == '\\':
				esc = true
			case ch == '"':
				inStr = false
			}
			continue
		case ch == ' ', ch == '\t', ch == '\n', ch == '\r':
			continue
		}
		if depth == 0 && ch != ']' {
			empty = false
		}
		switch ch {
		case '"':
			inStr = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 0 {
				n++
			}
		}
	}
	if !empty {
		n++
	}
	*c = txCount(n)
	return nil
}

// parseBlock turns the raw JSON result of eth_getBlockByNumber (hydrated or
// not) into row values. It validates everything it reads and never panics:
// the input comes from the network. It is the reference decoder: the hot
// path, blockResult, must agree with it on every input (FuzzFastParse).
func parseBlock(raw []byte) (blockRow, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return blockRow{}, errBlockNotFound
	}
	var b rpcBlock
	if err := json.Unmarshal(raw, &b); err != nil {
		return blockRow{}, fmt.Errorf("decode block: %w", err)
	}
	return b.row()
}

// row validates the decoded fields and converts them.
func (b *rpcBlock) row() (blockRow, error) {
	var r blockRow
	var err error
	if r.Number, err = quantity("number", b.Number, math.MaxInt64); err != nil {
		return blockRow{}, err
	}
	if r.Hash, err = hashField("hash", b.Hash, 32); err != nil {
		return blockRow{}, err
	}
	if r.ParentHash, err = hashField("parentHash", b.ParentHash, 32); err != nil {
		return blockRow{}, err
	}
	if r.Miner, err = hashField("miner", b.Miner, 20); err != nil {
		return blockRow{}, err
	}
	ts, err := quantity("timestamp", b.Timestamp, math.MaxInt64/1_000_000)
	if err != nil {
		return blockRow{}, err
	}
	r.BlockTS = ts * 1_000_000
	if r.GasUsed, err = quantity("gasUsed", b.GasUsed, math.MaxInt64); err != nil {
		return blockRow{}, err
	}
	if b.Transactions == nil {
		return blockRow{}, errors.New("block has no transactions field")
	}
	r.TransactionCount = int64(*b.Transactions)
	return r, nil
}

// blockResult is the JSON-RPC result slot of one eth_getBlockByNumber call.
// encoding/json validates the bytes before UnmarshalJSON, so one pass over
// them finds the seven fields, instead of a second validation plus a
// reflective decode that skips the 512-byte bloom and ~200 hashes. Anything
// unusual (escapes, keys differing only in case, non-string values) takes
// the reference path, so both always agree. A decode failure is kept in err
// rather than returned, so it reaches the caller as a bad block, not as an
// rpc error.
type blockResult struct {
	set bool
	row blockRow
	err error
}

// UnmarshalJSON implements json.Unmarshaler; it never fails.
func (r *blockResult) UnmarshalJSON(data []byte) error {
	r.set = true
	r.row, r.err = parseValidBlock(data)
	return nil
}

// parseValidBlock is parseBlock for input that is valid JSON.
func parseValidBlock(data []byte) (blockRow, error) {
	var b rpcBlock
	i := skipWS(data, 0)
	if i < len(data) && data[i] == 'n' {
		return blockRow{}, errBlockNotFound
	}
	if i >= len(data) || data[i] != '{' {
		return parseBlock(data)
	}
	i++
	for {
		i = skipWS(data, i)
		if i >= len(data) || data[i] == '}' {
			break
		}
		key, j, ok := plainString(data, i)
		if !ok {
			return parseBlock(data)
		}
		i = skipWS(data, j)
		if i >= len(data) || data[i] != ':' {
			return parseBlock(data)
		}
		i = skipWS(data, i+1)
		var dst **string
		switch key {
		case "number":
			dst = &b.Number
		case "hash":
			dst = &b.Hash
		case "parentHash":
			dst = &b.ParentHash
		case "timestamp":
			dst = &b.Timestamp
		case "miner":
			dst = &b.Miner
		case "gasUsed":
			dst = &b.GasUsed
		case "transactions":
			end := skipValue(data, i)
			if data[i] != '[' {
				return parseBlock(data)
			}
			var c txCount
			if err := c.UnmarshalJSON(data[i:end]); err != nil {
				return parseBlock(data)
			}
			b.Transactions = &c
			i = end
		default:
			for _, f := range [...]string{"number", "hash", "parentHash", "timestamp", "miner", "gasUsed", "transactions"} {
				if strings.EqualFold(key, f) {
					return parseBlock(data) // encoding/json matches keys case-insensitively
				}
			}
			i = skipValue(data, i)
		}
		if dst != nil {
			v, j, ok := plainString(data, i)
			if !ok {
				return parseBlock(data)
			}
			*dst = &v
			i = j
		}
		i = skipWS(data, i)
		if i < len(data) && data[i] == ',' {
			i++
		}
	}
	return b.row()
}

func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at d[i] without escapes; ok is false for
// anything else.
func plainString(d []byte, i int) (string, int, bool) {
	if i >= len(d) || d[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(d); j++ {
		switch d[j] {
		case '\\':
			return "", i, false
		case '"':
			return string(d[i+1 : j]), j + 1, true
		}
	}
	return "", i, false
}

// skipValue returns the index after the valid JSON value starting at d[i].
func skipValue(d []byte, i int) int {
	depth, inStr, esc := 0, false, false
	for ; i < len(d); i++ {
		c := d[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if depth == 0 {
					return i + 1
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // end of the enclosing container
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

func quantity(field string, s *string, max uint64) (int64, error) {
	if s == nil {
		return 0, fmt.Errorf("block field %s missing", field)
	}
	v, err := hexutil.DecodeUint64(*s)
	if err != nil {
		return 0, fmt.Errorf("block field %s %q: %w", field, *s, err)
	}
	if v > max {
		return 0, fmt.Errorf("block field %s %q out of range", field, *s)
	}
	return int64(v), nil
}

func hashField(field string, s *string, size int) (string, error) {
	if s == nil {
		return "", fmt.Errorf("block field %s missing", field)
	}
	h, err := normHex(*s, size)
	if err != nil {
		return "", fmt.Errorf("block field %s: %w", field, err)
	}
	return h, nil
}

// normHex checks that s is 0x followed by exactly size bytes of hex and
// returns it lowercased.
func normHex(s string, size int) (string, error) {
	if len(s) != 2+2*size || (s[:2] != "0x" && s[:2] != "0X") {
		return "", fmt.Errorf("%q is not 0x-prefixed %d-byte hex", s, size)
	}
	out := make([]byte, len(s))
	out[0], out[1] = '0', 'x'
	for i := 2; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			c += 'a' - 'A'
		default:
			return "", fmt.Errorf("%q is not 0x-prefixed %d-byte hex", s, size)
		}
		out[i] = c
	}
	return string(out), nil
}
