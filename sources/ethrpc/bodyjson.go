package ethrpc

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
)

// A table source decodes every transaction and receipt of every block it
// emits: about a megabyte of JSON a mainnet block. Through encoding/json and
// go-ethereum's generated decoders each byte was validated three times
// (the block as one value, each transaction again, "from" a third time) and
// decoded by reflection: 60% of a transactions query's source CPU (issue 43,
// the freshness bench). The decoders here read the bytes encoding/json
// validated once, in one pass, and build the same go-ethereum values.
//
// They are exact by construction rather than by care: each one handles the
// shape a node sends (plain strings, every key spelt as go-ethereum spells
// it, no duplicate key, null only where it means absent) and hands anything
// else, for that one value, to the reference decoder (encoding/json and
// go-ethereum's UnmarshalJSON), which then also owns every error. Hex
// values are decoded by the very UnmarshalText methods go-ethereum's JSON
// decoders call, but for the fixed-size ones (hashes, addresses, blooms):
// fixedHex accepts exactly what their hexutil.UnmarshalFixedText does
// (FuzzFixedHex). FuzzTxJSON and FuzzReceiptJSON check that whenever a fast
// decoder answers, the reference answers the same and without error.

// fullBlock is the part of eth_getBlockByHash(hash, true) a table reads: a
// JSON null leaves it zero (the endpoint does not know the block).
type fullBlock struct {
	Hash      common.Hash
	Number    *hexBig
	Timestamp *hexBig
	// Txs and Senders are the transactions and their from addresses; a
	// transaction that failed to decode is nil, and TxErr (the first such
	// failure) says why.
	Txs     []*types.Transaction
	Senders []common.Address
	TxErr   error
}

// refFullBlock is fullBlock as encoding/json decodes it: the reference.
type refFullBlock struct {
	Hash         common.Hash       `json:"hash"`
	Number       *hexBig           `json:"number"`
	Timestamp    *hexBig           `json:"timestamp"`
	Transactions []json.RawMessage `json:"transactions"`
}

var fullBlockKeys = []string{"hash", "number", "timestamp", "transactions"}

// UnmarshalJSON implements json.Unmarshaler (data is valid JSON).
func (b *fullBlock) UnmarshalJSON(data []byte) error {
	*b = fullBlock{}
	if isNull(data) {
		return nil
	}
	var seen [4]bool
	ok := eachField(data, func(key, v []byte) bool {
		k := knownKey(key, fullBlockKeys)
		if k < 0 {
			return k == -1
		}
		if seen[k] {
			return false
		}
		seen[k] = true
		switch k {
		case 0:
			s, ok := strValue(v)
			return ok && fixedHex(b.Hash[:], s) == nil
		case 1, 2:
			s, ok := strValue(v)
			if !ok {
				return false
			}
			var h hexBig
			if h.unmarshalText(s) != nil {
				return false
			}
			if k == 1 {
				b.Number = &h
			} else {
				b.Timestamp = &h
			}
			return true
		}
		return eachElem(v, func(i int, tv []byte) bool {
			b.addTx(i, tv)
			return true
		}) && b.Txs != nil
	})
	if ok {
		return nil
	}
	*b = fullBlock{}
	var ref refFullBlock
	if err := json.Unmarshal(data, &ref); err != nil {
		return err
	}
	b.Hash, b.Number, b.Timestamp = ref.Hash, ref.Number, ref.Timestamp
	b.Txs = make([]*types.Transaction, 0, len(ref.Transactions))
	for i, raw := range ref.Transactions {
		b.addTx(i, raw)
	}
	return nil
}

// addTx decodes transaction i (valid JSON) and its from address.
func (b *fullBlock) addTx(i int, data []byte) {
	if b.Txs == nil {
		b.Txs = make([]*types.Transaction, 0, 64)
	}
	tx, from, err := decodeTx(data)
	if err != nil && b.TxErr == nil {
		b.TxErr = fmt.Errorf("transaction %d: %w", i, err)
	}
	b.Txs = append(b.Txs, tx)
	b.Senders = append(b.Senders, from)
}

// errNoFrom is a transaction without a from address.
var errNoFrom = fmt.Errorf("no from address")

// decodeTx is a transaction of a hydrated block and its from address
// (valid JSON): tx is nil when err is set.
func decodeTx(data []byte) (*types.Transaction, common.Address, error) {
	if tx, from, ok := fastTx(data); ok {
		return tx, from, nil
	}
	return refTx(data)
}

// refTx is decodeTx by go-ethereum's decoder, the reference.
func refTx(data []byte) (*types.Transaction, common.Address, error) {
	tx := new(types.Transaction)
	if err := tx.UnmarshalJSON(data); err != nil {
		return nil, common.Address{}, err
	}
	var from struct {
		From *common.Address `json:"from"`
	}
	if err := json.Unmarshal(data, &from); err != nil || from.From == nil {
		return nil, common.Address{}, errNoFrom
	}
	return tx, *from.From, nil
}

// txKeys are the keys go-ethereum's transaction decoder reads (txJSON),
// and from.
var txKeys = []string{"type", "chainId", "nonce", "to", "gas", "gasPrice", "maxPriorityFeePerGas", "maxFeePerGas",
	"maxFeePerBlobGas", "value", "input", "accessList", "blobVersionedHashes", "authorizationList", "v", "r", "s",
	"yParity", "blobs", "commitments", "proofs", "hash", "from"}

// txFields is a transaction's JSON fields as go-ethereum's txJSON holds
// them (nil: absent or null), and from.
type txFields struct {
	typ                                  uint64
	chainID, price, tip, feeCap, blobCap *big.Int
	value, v, r, s                       *big.Int
	nonce, gas, yParity                  *uint64
	to, from                             *common.Address
	input                                *[]byte
	accessList                           *types.AccessList
	blobHashes                           []common.Hash
	authList                             []types.SetCodeAuthorization
}

// fastTx decodes the usual shape of a transaction; ok is false for
// anything else, which the reference then decodes.
func fastTx(data []byte) (tx *types.Transaction, from common.Address, ok bool) {
	var f txFields
	var seen uint32 // the array fields seen
	if !eachField(data, func(key, v []byte) bool {
		k := knownKey(key, txKeys)
		if k < 0 {
			return k == -1
		}
		name := txKeys[k]
		if name == "accessList" || name == "authorizationList" || name == "blobVersionedHashes" {
			// encoding/json decodes a repeated array into the first one's
			// elements, keeping what the second lacks: left to it.
			if seen&(1<<k) != 0 {
				return false
			}
			seen |= 1 << k
		}
		if isNull(v) {
			// null sets a pointer nil, as if absent (a repeated key: the
			// last wins, as in encoding/json; the in-repo node repeats
			// gasPrice, null then the effective price); type and hash are
			// values, whose decoders refuse null.
			f.clear(name)
			return name != "type" && name != "hash"
		}
		return f.set(k, v)
	}) || f.from == nil {
		return nil, from, false
	}
	inner := f.inner()
	if inner == nil {
		return nil, from, false
	}
	return types.NewTx(inner), *f.from, true
}

// set decodes the value v (not null) of txKeys[k]; false for a value the
// fast path leaves to the reference.
func (f *txFields) set(k int, v []byte) bool {
	switch txKeys[k] {
	case "accessList":
		f.accessList = new(types.AccessList)
		if bytes.Equal(v, []byte("[]")) {
			*f.accessList = types.AccessList{}
			return true
		}
		return json.Unmarshal(v, f.accessList) == nil
	case "authorizationList":
		return json.Unmarshal(v, &f.authList) == nil
	case "blobVersionedHashes":
		f.blobHashes = make([]common.Hash, 0, 2)
		return eachElem(v, func(_ int, e []byte) bool {
			var h common.Hash
			s, ok := strValue(e)
			f.blobHashes = append(f.blobHashes, h)
			return ok && fixedHex(f.blobHashes[len(f.blobHashes)-1][:], s) == nil
		})
	case "blobs", "commitments", "proofs":
		return false // a sidecar: rare, left to the reference
	}
	s, ok := strValue(v)
	if !ok {
		return false
	}
	switch key := txKeys[k]; key {
	case "type":
		var x hexutil.Uint64
		if x.UnmarshalText(s) != nil {
			return false
		}
		f.typ = uint64(x)
	case "nonce", "gas", "yParity":
		x := new(hexutil.Uint64)
		if x.UnmarshalText(s) != nil {
			return false
		}
		switch key {
		case "nonce":
			f.nonce = (*uint64)(x)
		case "gas":
			f.gas = (*uint64)(x)
		default:
			f.yParity = (*uint64)(x)
		}
	case "to", "from":
		a := new(common.Address)
		if fixedHex(a[:], s) != nil {
			return false
		}
		if key == "to" {
			f.to = a
		} else {
			f.from = a
		}
	case "input":
		var b hexutil.Bytes
		if b.UnmarshalText(s) != nil {
			return false
		}
		f.input = (*[]byte)(&b)
	case "hash":
		var h common.Hash
		return fixedHex(h[:], s) == nil
	default: // the big quantities
		x := new(hexutil.Big)
		if x.UnmarshalText(s) != nil {
			return false
		}
		f.setBig(key, x.ToInt())
	}
	return true
}

// clear sets the field of key nil, as a JSON null does.
func (f *txFields) clear(key string) {
	switch key {
	case "nonce":
		f.nonce = nil
	case "gas":
		f.gas = nil
	case "yParity":
		f.yParity = nil
	case "to":
		f.to = nil
	case "from":
		f.from = nil
	case "input":
		f.input = nil
	case "accessList":
		f.accessList = nil
	case "authorizationList":
		f.authList = nil
	case "blobVersionedHashes":
		f.blobHashes = nil
	case "type", "hash", "blobs", "commitments", "proofs":
	default:
		f.setBig(key, nil)
	}
}

// setBig sets the big quantity of key.
func (f *txFields) setBig(key string, x *big.Int) {
	switch key {
	case "chainId":
		f.chainID = x
	case "gasPrice":
		f.price = x
	case "maxPriorityFeePerGas":
		f.tip = x
	case "maxFeePerGas":
		f.feeCap = x
	case "maxFeePerBlobGas":
		f.blobCap = x
	case "value":
		f.value = x
	case "v":
		f.v = x
	case "r":
		f.r = x
	case "s":
		f.s = x
	default:
		panic("ethrpc: txFields.set of " + key)
	}
}

// inner is the transaction go-ethereum's decoder builds from f, nil where
// it would fail or the fast path does not go (then the reference decides).
func (f *txFields) inner() types.TxData {
	if f.nonce == nil || f.gas == nil || f.value == nil || f.input == nil || f.r == nil || f.s == nil {
		return nil
	}
	var al types.AccessList
	if f.accessList != nil {
		al = *f.accessList
	}
	switch f.typ {
	case types.LegacyTxType:
		if f.price == nil || f.v == nil || !legacySigOK(f.v, f.r, f.s) {
			return nil
		}
		return &types.LegacyTx{Nonce: *f.nonce, GasPrice: f.price, Gas: *f.gas, To: f.to, Value: f.value, Data: *f.input,
			V: f.v, R: f.r, S: f.s}
	case types.AccessListTxType, types.DynamicFeeTxType, types.BlobTxType, types.SetCodeTxType:
	default:
		return nil
	}
	v := f.parity()
	// types.NewTx copies a nil access list as an empty one; the reference
	// keeps it nil: left to it (nodes send [] for a typed transaction).
	if f.chainID == nil || v == nil || f.accessList == nil || !typedSigOK(v, f.r, f.s) {
		return nil
	}
	switch f.typ {
	case types.AccessListTxType:
		if f.price == nil {
			return nil
		}
		return &types.AccessListTx{ChainID: f.chainID, Nonce: *f.nonce, GasPrice: f.price, Gas: *f.gas, To: f.to,
			Value: f.value, Data: *f.input, AccessList: al, V: v, R: f.r, S: f.s}
	case types.DynamicFeeTxType:
		if f.tip == nil || f.feeCap == nil {
			return nil
		}
		return &types.DynamicFeeTx{ChainID: f.chainID, Nonce: *f.nonce, GasTipCap: f.tip, GasFeeCap: f.feeCap, Gas: *f.gas,
			To: f.to, Value: f.value, Data: *f.input, AccessList: al, V: v, R: f.r, S: f.s}
	}
	if f.to == nil || f.tip == nil || f.feeCap == nil {
		return nil
	}
	// hexutil.Big holds at most 256 bits: every value fits a uint256.
	u := uint256.MustFromBig
	if f.typ == types.BlobTxType {
		if f.blobCap == nil || len(f.blobHashes) == 0 {
			return nil
		}
		return &types.BlobTx{ChainID: u(f.chainID), Nonce: *f.nonce, GasTipCap: u(f.tip), GasFeeCap: u(f.feeCap), Gas: *f.gas,
			To: *f.to, Value: u(f.value), Data: *f.input, AccessList: al, BlobFeeCap: u(f.blobCap), BlobHashes: f.blobHashes,
			V: u(v), R: u(f.r), S: u(f.s)}
	}
	if f.authList == nil {
		return nil
	}
	return &types.SetCodeTx{ChainID: u(f.chainID), Nonce: *f.nonce, GasTipCap: u(f.tip), GasFeeCap: u(f.feeCap), Gas: *f.gas,
		To: *f.to, Value: u(f.value), Data: *f.input, AccessList: al, AuthList: f.authList, V: u(v), R: u(f.r), S: u(f.s)}
}

// parity is a typed transaction's signature V by yParityValue's rule:
// yParity, which must be 0 or 1 and equal v when both are given, else v.
func (f *txFields) parity() *big.Int {
	if f.yParity == nil {
		return f.v
	}
	if *f.yParity > 1 {
		return nil
	}
	y := new(big.Int).SetUint64(*f.yParity)
	if f.v != nil && f.v.Cmp(y) != 0 {
		return nil
	}
	return y
}

// legacySigOK accepts the legacy signatures go-ethereum's decoder surely
// accepts (sanityCheckSignature with maybeProtected): all zero (unsigned),
// or v 27/28 or an EIP-155 v (35 + 2·chainId + parity, below 2⁶³), with r
// and s valid.
func legacySigOK(v, r, s *big.Int) bool {
	if v.Sign() == 0 && r.Sign() == 0 && s.Sign() == 0 {
		return true
	}
	if !v.IsUint64() || v.Uint64() > 1<<63 {
		return false
	}
	var plain byte
	switch x := v.Uint64(); {
	case x == 27 || x == 28:
		plain = byte(x - 27)
	case x >= 35:
		plain = byte(x - 35 - 2*((x-35)/2))
	default:
		return false
	}
	return validSig(plain, r, s)
}

// validSig is go-ethereum's check of a signature's values.
func validSig(v byte, r, s *big.Int) bool { return crypto.ValidateSignatureValues(v, r, s, false) }

// typedSigOK is legacySigOK for a typed transaction: v is the parity.
func typedSigOK(v, r, s *big.Int) bool {
	if v.Sign() == 0 && r.Sign() == 0 && s.Sign() == 0 {
		return true
	}
	return v.IsUint64() && v.Uint64() <= 1 && validSig(byte(v.Uint64()), r, s)
}

// isNull reports whether v (valid JSON) is null.
func isNull(v []byte) bool {
	i := skipWS(v, 0)
	return i < len(v) && v[i] == 'n'
}

// strValue is the contents of the JSON string v when it has no escape
// (then the bytes are the string); ok is false for anything else.
func strValue(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil, false
	}
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		return nil, false
	}
	return s, true
}

// knownKey is key's index in keys; -1 for a key encoding/json would not
// match to any of them (skipped), -2 for one it might match other than
// byte for byte (it folds case, Unicode included): the fast path then
// leaves the value to the reference.
func knownKey(key []byte, keys []string) int {
	for i, k := range keys {
		if string(key) == k {
			return i
		}
	}
	for _, c := range key {
		if c >= 0x80 {
			return -2
		}
	}
	for _, k := range keys {
		if strings.EqualFold(string(key), k) {
			return -2
		}
	}
	return -1
}

// eachKnownField calls f with the index in keys and the value of each
// field of the JSON object data whose value is not null, and returns the
// bit set of those indexes; ok is false when f refused a field, a key
// appears twice, or a key matches one of keys only by case or is not plain
// (knownKey: what the reference decoder would read differently). Null
// fields are skipped as absent. keys has at most 32 entries.
func eachKnownField(data []byte, keys []string, f func(k int, v []byte) bool) (got uint32, ok bool) {
	var seen uint32
	ok = eachField(data, func(key, v []byte) bool {
		k := knownKey(key, keys)
		if k < 0 {
			return k == -1
		}
		if seen&(1<<k) != 0 {
			return false
		}
		seen |= 1 << k
		if isNull(v) {
			return true
		}
		got |= 1 << k
		return f(k, v)
	})
	return got, ok
}

// eachField calls f with each key (a plain string) and value of the JSON
// object data (valid JSON) until f returns false; it reports whether data
// is an object whose keys are all plain and f accepted every field.
func eachField(data []byte, f func(key, v []byte) bool) bool {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	for {
		i = skipWS(data, i)
		if i >= len(data) {
			return false
		}
		if data[i] == '}' {
			return true
		}
		key, ok := strValue(data[i:min(skipValue(data, i), len(data))])
		if !ok {
			return false
		}
		i = skipWS(data, i+len(key)+2)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipWS(data, i+1)
		end := skipValue(data, i)
		if !f(key, data[i:end]) {
			return false
		}
		i = skipWS(data, end)
		if i < len(data) && data[i] == ',' {
			i++
		}
	}
}

// eachElem calls f with each element of the JSON array data (valid JSON)
// until f returns false; it reports whether data is an array and f
// accepted every element.
func eachElem(data []byte, f func(i int, v []byte) bool) bool {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		return false
	}
	i++
	for n := 0; ; n++ {
		i = skipWS(data, i)
		if i >= len(data) {
			return false
		}
		if data[i] == ']' {
			return true
		}
		end := skipValue(data, i)
		if !f(n, data[i:end]) {
			return false
		}
		i = skipWS(data, end)
		if i < len(data) && data[i] == ',' {
			i++
		}
	}
}

// blockReceipts is eth_getBlockReceipts' answer, nil for null.
type blockReceipts []*types.Receipt

// UnmarshalJSON implements json.Unmarshaler (data is valid JSON): one
// receipt the fast path leaves sends the whole answer to the reference, so
// that an error is the one encoding/json gives.
func (rs *blockReceipts) UnmarshalJSON(data []byte) error {
	*rs = nil
	if isNull(data) {
		return nil
	}
	out := make([]*types.Receipt, 0, 64)
	if eachElem(data, func(_ int, v []byte) bool {
		rc, ok := fastReceipt(v)
		out = append(out, rc)
		return ok
	}) {
		*rs = out
		return nil
	}
	var ref []*types.Receipt
	if err := json.Unmarshal(data, &ref); err != nil {
		return err
	}
	*rs = ref
	return nil
}

// receiptKeys are the keys of go-ethereum's Receipt JSON.
var receiptKeys = []string{"type", "root", "status", "cumulativeGasUsed", "logsBloom", "logs", "transactionHash",
	"contractAddress", "gasUsed", "effectiveGasPrice", "blobGasUsed", "blobGasPrice", "blockHash", "blockNumber",
	"transactionIndex"}

// fastReceipt decodes the usual shape of a receipt as Receipt.UnmarshalJSON
// does; ok is false for anything else.
func fastReceipt(data []byte) (*types.Receipt, bool) {
	r := new(types.Receipt)
	// Every field is a pointer: null is absent.
	got, ok := eachKnownField(data, receiptKeys, func(k int, v []byte) bool {
		if key := receiptKeys[k]; key == "logs" {
			r.Logs = make([]*types.Log, 0, 4)
			return eachElem(v, func(_ int, lv []byte) bool {
				l, ok := fastLog(lv)
				r.Logs = append(r.Logs, l)
				return ok
			})
		}
		s, ok := strValue(v)
		if !ok {
			return false
		}
		var err error
		switch key := receiptKeys[k]; key {
		case "type", "status", "cumulativeGasUsed", "gasUsed", "blobGasUsed":
			var x hexutil.Uint64
			err = x.UnmarshalText(s)
			switch key {
			case "type":
				r.Type = uint8(x)
			case "status":
				r.Status = uint64(x)
			case "cumulativeGasUsed":
				r.CumulativeGasUsed = uint64(x)
			case "gasUsed":
				r.GasUsed = uint64(x)
			default:
				r.BlobGasUsed = uint64(x)
			}
		case "root":
			var b hexutil.Bytes
			err = b.UnmarshalText(s)
			r.PostState = b
		case "logsBloom":
			err = fixedHex(r.Bloom[:], s)
		case "transactionHash":
			err = fixedHex(r.TxHash[:], s)
		case "blockHash":
			err = fixedHex(r.BlockHash[:], s)
		case "contractAddress":
			err = fixedHex(r.ContractAddress[:], s)
		case "transactionIndex":
			var x hexutil.Uint
			err = x.UnmarshalText(s)
			r.TransactionIndex = uint(x)
		default: // effectiveGasPrice, blobGasPrice, blockNumber
			x := new(hexutil.Big)
			err = x.UnmarshalText(s)
			switch key {
			case "effectiveGasPrice":
				r.EffectiveGasPrice = x.ToInt()
			case "blobGasPrice":
				r.BlobGasPrice = x.ToInt()
			default:
				r.BlockNumber = x.ToInt()
			}
		}
		return err == nil
	})
	const required = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<8 // cumulativeGasUsed, logsBloom, logs, transactionHash, gasUsed
	return r, ok && got&required == required
}

// logKeys are the keys of go-ethereum's Log JSON.
var logKeys = []string{"address", "topics", "data", "blockNumber", "transactionHash", "transactionIndex", "blockHash",
	"blockTimestamp", "logIndex", "removed"}

// fastLog decodes the usual shape of a log as Log.UnmarshalJSON does; ok
// is false for anything else.
func fastLog(data []byte) (*types.Log, bool) {
	l := new(types.Log)
	// Every field is a pointer or a slice: null is absent.
	got, ok := eachKnownField(data, logKeys, func(k int, v []byte) bool {
		switch key := logKeys[k]; key {
		case "topics":
			l.Topics = make([]common.Hash, 0, 4)
			return eachElem(v, func(_ int, e []byte) bool {
				s, ok := strValue(e)
				l.Topics = append(l.Topics, common.Hash{})
				return ok && fixedHex(l.Topics[len(l.Topics)-1][:], s) == nil
			})
		case "removed":
			switch string(v) {
			case "true":
				l.Removed = true
			case "false":
			default:
				return false
			}
			return true
		}
		s, ok := strValue(v)
		if !ok {
			return false
		}
		var err error
		switch key := logKeys[k]; key {
		case "address":
			err = fixedHex(l.Address[:], s)
		case "data":
			var b hexutil.Bytes
			err = b.UnmarshalText(s)
			l.Data = b
		case "transactionHash":
			err = fixedHex(l.TxHash[:], s)
		case "blockHash":
			err = fixedHex(l.BlockHash[:], s)
		case "blockNumber", "blockTimestamp":
			var x hexutil.Uint64
			err = x.UnmarshalText(s)
			if key == "blockNumber" {
				l.BlockNumber = uint64(x)
			} else {
				l.BlockTimestamp = uint64(x)
			}
		default: // transactionIndex, logIndex
			var x hexutil.Uint
			err = x.UnmarshalText(s)
			if key == "logIndex" {
				l.Index = uint(x)
			} else {
				l.TxIndex = uint(x)
			}
		}
		return err == nil
	})
	const required = 1<<0 | 1<<1 | 1<<2 | 1<<4 // address, topics, data, transactionHash
	return l, ok && got&required == required
}

// errFixedHex is fixedHex's one error: the fast decoders only tell a value
// that decodes from one that does not (and then leave it to go-ethereum's).
var errFixedHex = errors.New("not a fixed-size hex value")

// fixedHex decodes s into out as hexutil.UnmarshalFixedText (the
// UnmarshalText of common.Hash, common.Address and types.Bloom) accepts it:
// "0x" or "0X", then exactly 2*len(out) hex digits of either case; out is
// left as it was otherwise. One pass over the digits, where
// UnmarshalFixedText checks them before hex.Decode reads them again: a
// tenth of a live block's decoding went there.
func fixedHex(out []byte, s []byte) error {
	if len(s) != 2+2*len(out) || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || len(out) > types.BloomByteLength {
		return errFixedHex
	}
	var tmp [types.BloomByteLength]byte
	if _, err := hex.Decode(tmp[:len(out)], s[2:]); err != nil {
		return errFixedHex
	}
	copy(out, tmp[:len(out)])
	return nil
}
