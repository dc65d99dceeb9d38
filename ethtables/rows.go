package ethtables

import (
	"encoding/hex"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Table names, as the dataset's directories under v1.0/eth.
const (
	Transactions   = "transactions"
	Logs           = "logs"
	TokenTransfers = "token_transfers"
)

// Names lists the tables of this package.
var Names = []string{Transactions, Logs, TokenTransfers}

// TransferTopic is the ERC-20 Transfer(address,address,uint256) event's
// topic 0.
var TransferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

// Transaction is a transactions-table row. to_address is null for a
// contract creation, receipt_contract_address null otherwise,
// receipt_status null before Byzantium (the receipt held a state root),
// the two EIP-1559 fee caps null for other transaction types; gas_price is
// what eth_getTransactionByHash reports: the effective price for an
// EIP-1559 transaction.
type Transaction struct {
	Hash                     string  `parquet:"hash"`
	Nonce                    int64   `parquet:"nonce"`
	TransactionIndex         int64   `parquet:"transaction_index"`
	FromAddress              string  `parquet:"from_address"`
	ToAddress                *string `parquet:"to_address,optional"`
	Value                    float64 `parquet:"value"`
	Gas                      int64   `parquet:"gas"`
	GasPrice                 int64   `parquet:"gas_price"`
	Input                    string  `parquet:"input"`
	ReceiptCumulativeGasUsed int64   `parquet:"receipt_cumulative_gas_used"`
	ReceiptGasUsed           int64   `parquet:"receipt_gas_used"`
	ReceiptContractAddress   *string `parquet:"receipt_contract_address,optional"`
	ReceiptStatus            *int64  `parquet:"receipt_status,optional"`
	BlockTimestamp           int64   `parquet:"block_timestamp,timestamp(microsecond)"`
	BlockNumber              int64   `parquet:"block_number"`
	BlockHash                string  `parquet:"block_hash,dict"`
	MaxFeePerGas             *int64  `parquet:"max_fee_per_gas,optional"`
	MaxPriorityFeePerGas     *int64  `parquet:"max_priority_fee_per_gas,optional"`
	TransactionType          int64   `parquet:"transaction_type"`
	ReceiptEffectiveGasPrice int64   `parquet:"receipt_effective_gas_price"`
}

// Log is a logs-table row. topics is Spark's array<string>, written as a
// three-level LIST group (topics.list.element).
type Log struct {
	LogIndex         int64    `parquet:"log_index"`
	TransactionHash  string   `parquet:"transaction_hash"`
	TransactionIndex int64    `parquet:"transaction_index"`
	Address          string   `parquet:"address,dict"`
	Data             string   `parquet:"data"`
	Topics           []string `parquet:"topics,list"`
	BlockTimestamp   int64    `parquet:"block_timestamp,timestamp(microsecond)"`
	BlockNumber      int64    `parquet:"block_number"`
	BlockHash        string   `parquet:"block_hash,dict"`
}

// TokenTransfer is a token_transfers-table row: one per ERC-20 Transfer
// log, value the amount as a double.
type TokenTransfer struct {
	TokenAddress    string  `parquet:"token_address,dict"`
	FromAddress     string  `parquet:"from_address"`
	ToAddress       string  `parquet:"to_address"`
	Value           float64 `parquet:"value"`
	TransactionHash string  `parquet:"transaction_hash"`
	LogIndex        int64   `parquet:"log_index"`
	BlockTimestamp  int64   `parquet:"block_timestamp,timestamp(microsecond)"`
	BlockNumber     int64   `parquet:"block_number"`
	BlockHash       string  `parquet:"block_hash,dict"`
}

// Block is what a block's rows repeat of it.
type Block struct {
	Number uint64
	Hash   common.Hash
	Time   uint64 // unix seconds
}

// Hex renders b as 0x-prefixed lowercase hex.
func Hex(b []byte) string {
	buf := make([]byte, 2+2*len(b))
	buf[0], buf[1] = '0', 'x'
	hex.Encode(buf[2:], b)
	return string(buf)
}

func ptr[T any](v T) *T { return &v }

// bigFloat is a wei amount as the dataset's double: the nearest float64.
func bigFloat(v *big.Int) float64 {
	f, _ := new(big.Float).SetInt(v).Float64()
	return f
}

// TransactionRows are a block's transactions-table rows, in transaction
// order: txs[i] was sent by senders[i] and has receipt receipts[i].
func TransactionRows(b Block, txs []*types.Transaction, senders []common.Address, receipts []*types.Receipt) []Transaction {
	out := make([]Transaction, len(txs))
	bh := Hex(b.Hash[:])
	for i, tx := range txs {
		rc := receipts[i]
		r := Transaction{
			Hash: Hex(rc.TxHash[:]), Nonce: int64(tx.Nonce()), TransactionIndex: int64(i),
			FromAddress: Hex(senders[i][:]), Value: bigFloat(tx.Value()), Gas: int64(tx.Gas()),
			GasPrice: rc.EffectiveGasPrice.Int64(), Input: Hex(tx.Data()),
			ReceiptCumulativeGasUsed: int64(rc.CumulativeGasUsed), ReceiptGasUsed: int64(rc.GasUsed),
			BlockTimestamp: int64(b.Time) * 1_000_000, BlockNumber: int64(b.Number), BlockHash: bh,
			TransactionType: int64(tx.Type()), ReceiptEffectiveGasPrice: rc.EffectiveGasPrice.Int64(),
		}
		if tx.Type() != types.DynamicFeeTxType && tx.Type() != types.BlobTxType && tx.Type() != types.SetCodeTxType {
			r.GasPrice = tx.GasPrice().Int64()
		}
		if to := tx.To(); to != nil {
			r.ToAddress = ptr(Hex(to[:]))
		} else {
			r.ReceiptContractAddress = ptr(Hex(rc.ContractAddress[:]))
		}
		if len(rc.PostState) == 0 {
			r.ReceiptStatus = ptr(int64(rc.Status))
		}
		if tx.Type() >= types.DynamicFeeTxType {
			r.MaxFeePerGas, r.MaxPriorityFeePerGas = ptr(tx.GasFeeCap().Int64()), ptr(tx.GasTipCap().Int64())
		}
		out[i] = r
	}
	return out
}

// LogRows are a block's logs-table rows, in log-index order.
func LogRows(b Block, receipts []*types.Receipt) []Log {
	var out []Log
	bh := Hex(b.Hash[:])
	for _, rc := range receipts {
		for _, l := range rc.Logs {
			topics := make([]string, len(l.Topics))
			for k, t := range l.Topics {
				topics[k] = Hex(t[:])
			}
			out = append(out, Log{LogIndex: int64(l.Index), TransactionHash: Hex(l.TxHash[:]), TransactionIndex: int64(l.TxIndex),
				Address: Hex(l.Address[:]), Data: Hex(l.Data), Topics: topics,
				BlockTimestamp: int64(b.Time) * 1_000_000, BlockNumber: int64(b.Number), BlockHash: bh})
		}
	}
	return out
}

// IsTokenTransfer is whether a log is an ERC-20 Transfer: the event's
// topic and exactly two indexed addresses, the amount in 32 bytes of data
// (an ERC-721 Transfer indexes its token id too and has four topics).
func IsTokenTransfer(l *types.Log) bool {
	return len(l.Topics) == 3 && l.Topics[0] == TransferTopic && len(l.Data) == 32
}

// TokenTransferRows are a block's token_transfers-table rows: its ERC-20
// Transfer logs, in log-index order.
func TokenTransferRows(b Block, receipts []*types.Receipt) []TokenTransfer {
	var out []TokenTransfer
	bh := Hex(b.Hash[:])
	for _, rc := range receipts {
		for _, l := range rc.Logs {
			if !IsTokenTransfer(l) {
				continue
			}
			from, to := common.BytesToAddress(l.Topics[1][12:]), common.BytesToAddress(l.Topics[2][12:])
			out = append(out, TokenTransfer{TokenAddress: Hex(l.Address[:]), FromAddress: Hex(from[:]), ToAddress: Hex(to[:]),
				Value: bigFloat(new(big.Int).SetBytes(l.Data)), TransactionHash: Hex(l.TxHash[:]), LogIndex: int64(l.Index),
				BlockTimestamp: int64(b.Time) * 1_000_000, BlockNumber: int64(b.Number), BlockHash: bh})
		}
	}
	return out
}
