package ethrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// blockRow is one block's values as the engine's block columns hold them
// (package ethblock). The seven columns of ethblock.Core come first; the
// others are valid only when Full is set: a row read back from a version-1
// history (which recorded only the seven) has Full false.
type blockRow struct {
	Number           int64
	Hash             string // 0x-hex, lowercase
	ParentHash       string // 0x-hex, lowercase
	BlockTS          int64  // µs since the Unix epoch, UTC
	Miner            string // 0x-hex, lowercase
	TransactionCount int64
	GasUsed          int64

	Full             bool
	Nonce            string // 0x-hex, 8 bytes, lowercase (as every hex string below)
	Sha3Uncles       string
	LogsBloom        string
	TransactionsRoot string
	StateRoot        string
	ReceiptsRoot     string
	Difficulty       float64 // the nearest double, as the dataset holds it
	TotalDifficulty  float64 // valid if HasTotalDifficulty
	Size             int64
	ExtraData        string
	GasLimit         int64
	BaseFeePerGas    int64  // valid if HasBaseFee (from London)
	WithdrawalsRoot  string // valid if HasWithdrawalsRoot (from Shanghai)

	HasTotalDifficulty bool
	HasBaseFee         bool
	HasWithdrawalsRoot bool
}

// errBlockNotFound is a null result: the endpoint does not (yet) have the
// block, e.g. a load-balanced replica lagging behind the one that served
// eth_blockNumber. Callers retry it.
var errBlockNotFound = errors.New("block not found (null result)")

// rpcBlock is the subset of eth_getBlockByNumber's result the source reads.
// Fields are raw strings so that every check is ours and explicit.
type rpcBlock struct {
	Number           *string  `json:"number"`
	Hash             *string  `json:"hash"`
	ParentHash       *string  `json:"parentHash"`
	Timestamp        *string  `json:"timestamp"`
	Miner            *string  `json:"miner"`
	GasUsed          *string  `json:"gasUsed"`
	Transactions     *txCount `json:"transactions"`
	Nonce            *string  `json:"nonce"`
	Sha3Uncles       *string  `json:"sha3Uncles"`
	LogsBloom        *string  `json:"logsBloom"`
	TransactionsRoot *string  `json:"transactionsRoot"`
	StateRoot        *string  `json:"stateRoot"`
	ReceiptsRoot     *string  `json:"receiptsRoot"`
	Difficulty       *string  `json:"difficulty"`
	TotalDifficulty  *string  `json:"totalDifficulty"`
	Size             *string  `json:"size"`
	ExtraData        *string  `json:"extraData"`
	GasLimit         *string  `json:"gasLimit"`
	BaseFeePerGas    *string  `json:"baseFeePerGas"`
	WithdrawalsRoot  *string  `json:"withdrawalsRoot"`
}

// rpcFieldNames are the JSON keys of rpcBlock (transactions included).
var rpcFieldNames = [...]string{"number", "hash", "parentHash", "timestamp", "miner", "gasUsed", "transactions",
	"nonce", "sha3Uncles", "logsBloom", "transactionsRoot", "stateRoot", "receiptsRoot", "difficulty",
	"totalDifficulty", "size", "extraData", "gasLimit", "baseFeePerGas", "withdrawalsRoot"}

// field returns the string field of JSON key key, nil for transactions and
// other keys; optional reports whether JSON null means a null column.
func (b *rpcBlock) field(key string) (dst **string, optional bool) {
	switch key {
	case "number":
		return &b.Number, false
	case "hash":
		return &b.Hash, false
	case "parentHash":
		return &b.ParentHash, false
	case "timestamp":
		return &b.Timestamp, false
	case "miner":
		return &b.Miner, false
	case "gasUsed":
		return &b.GasUsed, false
	case "nonce":
		return &b.Nonce, false
	case "sha3Uncles":
		return &b.Sha3Uncles, false
	case "logsBloom":
		return &b.LogsBloom, false
	case "transactionsRoot":
		return &b.TransactionsRoot, false
	case "stateRoot":
		return &b.StateRoot, false
	case "receiptsRoot":
		return &b.ReceiptsRoot, false
	case "difficulty":
		return &b.Difficulty, false
	case "totalDifficulty":
		return &b.TotalDifficulty, true
	case "size":
		return &b.Size, false
	case "extraData":
		return &b.ExtraData, false
	case "gasLimit":
		return &b.GasLimit, false
	case "baseFeePerGas":
		return &b.BaseFeePerGas, true
	case "withdrawalsRoot":
		return &b.WithdrawalsRoot, true
	}
	return nil, false
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

// row validates the decoded fields and converts them. Every field is
// required but totalDifficulty (go-ethereum stopped reporting it in
// v1.14.9), baseFeePerGas (from London) and withdrawalsRoot (from
// Shanghai), which are null when missing or null.
func (b *rpcBlock) row() (blockRow, error) {
	r, err := b.core()
	if err != nil {
		return blockRow{}, err
	}
	if err := b.ext(&r); err != nil {
		return blockRow{}, err
	}
	r.Full = true
	return r, nil
}

// core validates and converts the seven columns of ethblock.Core.
func (b *rpcBlock) core() (blockRow, error) {
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

// ext validates and converts the columns beyond the seven into r.
func (b *rpcBlock) ext(r *blockRow) error {
	hashes := []struct {
		name string
		s    *string
		size int
		dst  *string
	}{
		{"nonce", b.Nonce, 8, &r.Nonce}, {"sha3Uncles", b.Sha3Uncles, 32, &r.Sha3Uncles},
		{"logsBloom", b.LogsBloom, 256, &r.LogsBloom}, {"transactionsRoot", b.TransactionsRoot, 32, &r.TransactionsRoot},
		{"stateRoot", b.StateRoot, 32, &r.StateRoot}, {"receiptsRoot", b.ReceiptsRoot, 32, &r.ReceiptsRoot},
	}
	var err error
	for _, h := range hashes {
		if *h.dst, err = hashField(h.name, h.s, h.size); err != nil {
			return err
		}
	}
	if r.Difficulty, err = bigQuantity("difficulty", b.Difficulty); err != nil {
		return err
	}
	if b.TotalDifficulty != nil {
		if r.TotalDifficulty, err = bigQuantity("totalDifficulty", b.TotalDifficulty); err != nil {
			return err
		}
		r.HasTotalDifficulty = true
	}
	if r.Size, err = quantity("size", b.Size, math.MaxInt64); err != nil {
		return err
	}
	if r.ExtraData, err = hexData("extraData", b.ExtraData); err != nil {
		return err
	}
	if r.GasLimit, err = quantity("gasLimit", b.GasLimit, math.MaxInt64); err != nil {
		return err
	}
	if b.BaseFeePerGas != nil {
		if r.BaseFeePerGas, err = quantity("baseFeePerGas", b.BaseFeePerGas, math.MaxInt64); err != nil {
			return err
		}
		r.HasBaseFee = true
	}
	if b.WithdrawalsRoot != nil {
		if r.WithdrawalsRoot, err = hashField("withdrawalsRoot", b.WithdrawalsRoot, 32); err != nil {
			return err
		}
		r.HasWithdrawalsRoot = true
	}
	return nil
}

// blockResult is the JSON-RPC result slot of one eth_getBlockByNumber call.
// encoding/json validates the bytes before UnmarshalJSON, so one pass over
// them finds the block's fields, instead of a second validation plus a
// reflective decode that skips ~200 transaction hashes. Anything
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
		if key == "transactions" {
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
		} else if dst, optional := b.field(key); dst != nil {
			if optional && data[i] == 'n' {
				*dst, i = nil, skipValue(data, i) // null: a null column, as encoding/json decodes it
			} else {
				v, j, ok := plainString(data, i)
				if !ok {
					return parseBlock(data)
				}
				*dst, i = &v, j
			}
		} else {
			for _, f := range rpcFieldNames {
				if strings.EqualFold(key, f) {
					return parseBlock(data) // encoding/json matches keys case-insensitively
				}
			}
			i = skipValue(data, i)
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
		if inStr && !esc {
			// Most of a body's bytes are long hex strings: jump to the
			// closing quote, or to the escape before it.
			q := bytes.IndexByte(d[i:], '"')
			if q < 0 {
				return len(d)
			}
			if b := bytes.IndexByte(d[i:i+q], '\\'); b >= 0 {
				q = b
			}
			i += q
			c = d[i]
		}
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

// bigQuantity decodes a hex quantity of up to 256 bits (difficulty, total
// difficulty: mainnet's total difficulty is above 2^64) to the nearest
// double, as the dataset stores it.
func bigQuantity(field string, s *string) (float64, error) {
	if s == nil {
		return 0, fmt.Errorf("block field %s missing", field)
	}
	v, err := hexutil.DecodeBig(*s)
	if err != nil {
		return 0, fmt.Errorf("block field %s %q: %w", field, *s, err)
	}
	f, _ := new(big.Float).SetInt(v).Float64()
	return f, nil
}

// hexData checks that s is 0x-prefixed hex of whole bytes (any length) and
// returns it lowercased.
func hexData(field string, s *string) (string, error) {
	if s == nil {
		return "", fmt.Errorf("block field %s missing", field)
	}
	if len(*s)%2 != 0 || len(*s) < 2 {
		return "", fmt.Errorf("block field %s: %q is not 0x-prefixed hex bytes", field, *s)
	}
	h, err := normHex(*s, len(*s)/2-1)
	if err != nil {
		return "", fmt.Errorf("block field %s: %w", field, err)
	}
	return h, nil
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

// toBatch builds the projected columns of rows. Every row must be Full
// when a column beyond ethblock.Core is projected (readRetract completes
// rows of a version-1 history first).
func (s *Source) toBatch(rows []blockRow) *stream.Batch {
	b := &stream.Batch{Len: len(rows), Columns: make([]stream.Column, 0, len(s.env.Columns))}
	for _, name := range s.env.Columns {
		typ, _ := ethblock.ColumnType(name)
		c := stream.Column{Name: name, Type: typ}
		var valid []bool
		null := func(i int) {
			if valid == nil {
				valid = make([]bool, len(rows))
				for k := range i {
					valid[k] = true
				}
			}
		}
		mark := func(i int, ok bool) {
			if !ok {
				null(i)
			} else if valid != nil {
				valid[i] = true
			}
		}
		switch typ {
		case stream.String:
			c.Strings = make([]string, len(rows))
			for i := range rows {
				v, ok := rows[i].stringValue(name)
				c.Strings[i] = v
				mark(i, ok)
			}
		case stream.Float64:
			c.Float64s = make([]float64, len(rows))
			for i := range rows {
				v, ok := rows[i].floatValue(name)
				c.Float64s[i] = v
				mark(i, ok)
			}
		default:
			c.Int64s = make([]int64, len(rows))
			for i := range rows {
				v, ok := rows[i].intValue(name)
				c.Int64s[i] = v
				mark(i, ok)
			}
		}
		c.Valid = valid
		b.Columns = append(b.Columns, c)
	}
	return b
}

// needsFull reports whether a projection reads a column beyond
// ethblock.Core, which only Full rows hold.
func needsFull(cols []string) bool {
	for _, c := range cols {
		if !slices.Contains(ethblock.Core, c) {
			return true
		}
	}
	return false
}

func (r *blockRow) mustBeFull(name string) {
	if !r.Full {
		panic(fmt.Sprintf("ethrpc: column %q of block %d, a row without it", name, r.Number))
	}
}

// intValue is the Int64 or Timestamp column name of r; ok is false for a
// null.
func (r *blockRow) intValue(name string) (v int64, ok bool) {
	switch name {
	case ethblock.ColNumber:
		return r.Number, true
	case ethblock.ColBlockTS:
		return r.BlockTS, true
	case ethblock.ColTransactionCount:
		return r.TransactionCount, true
	case ethblock.ColGasUsed:
		return r.GasUsed, true
	}
	r.mustBeFull(name)
	switch name {
	case ethblock.ColSize:
		return r.Size, true
	case ethblock.ColGasLimit:
		return r.GasLimit, true
	case ethblock.ColBaseFeePerGas:
		return r.BaseFeePerGas, r.HasBaseFee
	}
	panic(fmt.Sprintf("ethrpc: column %q passed Open's check", name))
}

// floatValue is the Float64 column name of r; ok is false for a null.
func (r *blockRow) floatValue(name string) (v float64, ok bool) {
	r.mustBeFull(name)
	switch name {
	case ethblock.ColDifficulty:
		return r.Difficulty, true
	case ethblock.ColTotalDifficulty:
		return r.TotalDifficulty, r.HasTotalDifficulty
	}
	panic(fmt.Sprintf("ethrpc: column %q passed Open's check", name))
}

// stringValue is the String column name of r; ok is false for a null.
func (r *blockRow) stringValue(name string) (v string, ok bool) {
	switch name {
	case ethblock.ColHash:
		return r.Hash, true
	case ethblock.ColParentHash:
		return r.ParentHash, true
	case ethblock.ColMiner:
		return r.Miner, true
	}
	r.mustBeFull(name)
	switch name {
	case ethblock.ColNonce:
		return r.Nonce, true
	case ethblock.ColSha3Uncles:
		return r.Sha3Uncles, true
	case ethblock.ColLogsBloom:
		return r.LogsBloom, true
	case ethblock.ColTransactionsRoot:
		return r.TransactionsRoot, true
	case ethblock.ColStateRoot:
		return r.StateRoot, true
	case ethblock.ColReceiptsRoot:
		return r.ReceiptsRoot, true
	case ethblock.ColExtraData:
		return r.ExtraData, true
	case ethblock.ColWithdrawalsRoot:
		return r.WithdrawalsRoot, r.HasWithdrawalsRoot
	}
	panic(fmt.Sprintf("ethrpc: column %q passed Open's check", name))
}
