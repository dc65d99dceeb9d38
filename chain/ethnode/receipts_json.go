package ethnode

import (
	"encoding/hex"
	"math/big"
	"strconv"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethstream/ethstream/chain"
)

// appendReceipt appends receipt i of a block as JSON, byte for byte what
// encoding/json makes of rpcReceipt's map (keys sorted, go-ethereum's
// encodings of hashes, addresses and quantities, logs as Log.MarshalJSON
// writes them; TestReceiptJSONMatchesMap). eth_getBlockReceipts renders
// every receipt of a block: through the map and reflection that was a
// quarter of the node's CPU in the transactions freshness bench (issue 43).
func appendReceipt(buf []byte, b *nodeBlock, body *chain.Body, i int) []byte {
	rc, tx := body.Receipts[i], body.Txs[i]
	buf = appendHexField(buf, '{', "blockHash", b.hash[:])
	buf = appendQuantity(buf, "blockNumber", b.header.Number.Uint64())
	if rc.ContractAddress != ([20]byte{}) {
		buf = appendHexField(buf, ',', "contractAddress", rc.ContractAddress[:])
	} else {
		buf = append(buf, `,"contractAddress":null`...)
	}
	buf = appendQuantity(buf, "cumulativeGasUsed", rc.CumulativeGasUsed)
	buf = appendBig(buf, "effectiveGasPrice", rc.EffectiveGasPrice)
	buf = appendHexField(buf, ',', "from", body.Senders[i][:])
	buf = appendQuantity(buf, "gasUsed", rc.GasUsed)
	buf = append(buf, `,"logs":[`...)
	for k, l := range rc.Logs {
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = appendLog(buf, l)
	}
	buf = append(buf, ']')
	buf = appendHexField(buf, ',', "logsBloom", rc.Bloom[:])
	if len(rc.PostState) > 0 {
		buf = appendHexField(buf, ',', "root", rc.PostState)
	} else {
		buf = appendQuantity(buf, "status", rc.Status)
	}
	if to := tx.To(); to != nil {
		buf = appendHexField(buf, ',', "to", to[:])
	} else {
		buf = append(buf, `,"to":null`...)
	}
	buf = appendHexField(buf, ',', "transactionHash", rc.TxHash[:])
	buf = appendQuantity(buf, "transactionIndex", uint64(i))
	buf = appendQuantity(buf, "type", uint64(tx.Type()))
	return append(buf, '}')
}

// appendLog appends l as Log.MarshalJSON writes it (its fields in
// declaration order).
func appendLog(buf []byte, l *types.Log) []byte {
	buf = appendHexField(buf, '{', "address", l.Address[:])
	if l.Topics == nil {
		buf = append(buf, `,"topics":null`...)
	} else {
		buf = append(buf, `,"topics":[`...)
		for k, t := range l.Topics {
			if k > 0 {
				buf = append(buf, ',')
			}
			buf = appendHex(buf, t[:])
		}
		buf = append(buf, ']')
	}
	buf = appendHexField(buf, ',', "data", l.Data)
	buf = appendQuantity(buf, "blockNumber", l.BlockNumber)
	buf = appendHexField(buf, ',', "transactionHash", l.TxHash[:])
	buf = appendQuantity(buf, "transactionIndex", uint64(l.TxIndex))
	buf = appendHexField(buf, ',', "blockHash", l.BlockHash[:])
	buf = appendQuantity(buf, "blockTimestamp", l.BlockTimestamp)
	buf = appendQuantity(buf, "logIndex", uint64(l.Index))
	return append(strconv.AppendBool(append(buf, `,"removed":`...), l.Removed), '}')
}

// appendHexField appends sep, the key and the 0x-hex string of v.
func appendHexField(buf []byte, sep byte, key string, v []byte) []byte {
	buf = append(append(append(append(buf, sep, '"'), key...), '"'), ':')
	return appendHex(buf, v)
}

// appendHex appends v as hexutil.Bytes encodes it: "0x" and lowercase hex.
func appendHex(buf []byte, v []byte) []byte {
	return append(hex.AppendEncode(append(buf, '"', '0', 'x'), v), '"')
}

// appendQuantity appends ,"key":"0x..." as hexutil.Uint64 encodes v.
func appendQuantity(buf []byte, key string, v uint64) []byte {
	buf = append(append(append(buf, ',', '"'), key...), `":"0x`...)
	return append(strconv.AppendUint(buf, v, 16), '"')
}

// appendBig appends ,"key": and v as hexutil.Big encodes it (null for nil).
func appendBig(buf []byte, key string, v *big.Int) []byte {
	buf = append(append(append(buf, ',', '"'), key...), `":`...)
	if v == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '"')
	if v.Sign() < 0 {
		buf = append(buf, '-')
	}
	buf = append(buf, '0', 'x')
	return append(new(big.Int).Abs(v).Append(buf, 16), '"')
}

// appendTxJSON appends tx as Transaction.MarshalJSON writes it, for the
// three types the model draws (legacy, EIP-2930, EIP-1559; false for
// another, which then goes through MarshalJSON): txJSON's fields in
// declaration order, a nil pointer without omitempty as null
// (TestTxJSONMatchesMarshal). Through reflection that was 60% of the
// node's rendering of a hydrated block (issue 43).
func appendTxJSON(buf []byte, tx *types.Transaction) ([]byte, bool) {
	typ := tx.Type()
	if typ > types.DynamicFeeTxType {
		return buf, false
	}
	v, r, s := tx.RawSignatureValues()
	buf = append(strconv.AppendUint(append(buf, `{"type":"0x`...), uint64(typ), 16), '"')
	if typ != types.LegacyTxType || tx.Protected() {
		buf = appendBig(buf, "chainId", tx.ChainId())
	}
	buf = appendQuantity(buf, "nonce", tx.Nonce())
	if to := tx.To(); to != nil {
		buf = appendHexField(buf, ',', "to", to[:])
	} else {
		buf = append(buf, `,"to":null`...)
	}
	buf = appendQuantity(buf, "gas", tx.Gas())
	var price, tip, feeCap *big.Int
	if typ == types.DynamicFeeTxType {
		tip, feeCap = tx.GasTipCap(), tx.GasFeeCap()
	} else {
		price = tx.GasPrice()
	}
	buf = appendBig(buf, "gasPrice", price)
	buf = appendBig(buf, "maxPriorityFeePerGas", tip)
	buf = appendBig(buf, "maxFeePerGas", feeCap)
	buf = appendBig(buf, "value", tx.Value())
	buf = appendHexField(buf, ',', "input", tx.Data())
	if typ != types.LegacyTxType {
		buf = appendAccessList(buf, tx.AccessList())
	}
	buf = appendBig(buf, "v", v)
	buf = appendBig(buf, "r", r)
	buf = appendBig(buf, "s", s)
	if typ != types.LegacyTxType {
		buf = appendQuantity(buf, "yParity", v.Uint64())
	}
	h := tx.Hash()
	return append(appendHexField(buf, ',', "hash", h[:]), '}'), true
}

// appendAccessList appends ,"accessList": and al as AccessTuple's JSON
// writes it.
func appendAccessList(buf []byte, al types.AccessList) []byte {
	buf = append(buf, `,"accessList":`...)
	if al == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for k, t := range al {
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = appendHexField(buf, '{', "address", t.Address[:])
		if t.StorageKeys == nil {
			buf = append(buf, `,"storageKeys":null}`...)
			continue
		}
		buf = append(buf, `,"storageKeys":[`...)
		for j, key := range t.StorageKeys {
			if j > 0 {
				buf = append(buf, ',')
			}
			buf = appendHex(buf, key[:])
		}
		buf = append(buf, "]}"...)
	}
	return append(buf, ']')
}
