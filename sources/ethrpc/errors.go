package ethrpc

import "github.com/ethstream/ethstream/errcode"

// Error codes of the ethrpc source. They are stable: scripts and operators
// match on them, so they are never renamed.
const (
	// CodeReorgDetected: the chain the endpoint serves no longer contains a
	// block this source already planned or committed (a reorganisation deeper
	// than the configured confirmations), or a fetched range is not a chain.
	CodeReorgDetected = "REORG_DETECTED"
	// CodeSeamMismatch: the very first block's parent hash differs from
	// start_parent_hash (normally the archive's last hash).
	CodeSeamMismatch = "SEAM_MISMATCH"
	// CodeRPCUnavailable: every endpoint failed for longer than the retry budget.
	CodeRPCUnavailable = "RPC_UNAVAILABLE"
	// CodeRPCRequestFailed: an endpoint refused a request for a reason
	// retrying cannot fix (bad API key, unknown method, invalid params).
	CodeRPCRequestFailed = "RPC_REQUEST_FAILED"
	// CodeResponseTooLarge: an endpoint's answer exceeded maxResponseSize;
	// it was read no further.
	CodeResponseTooLarge = "RPC_RESPONSE_TOO_LARGE"
	// CodeBadBlock: an endpoint returned a block that is not well formed.
	CodeBadBlock = "RPC_BAD_BLOCK"
	// CodeInvalidOption: a source option or URI is invalid.
	CodeInvalidOption = errcode.InvalidArgument
)

const (
	remedyReorg = "nothing from the changed chain was emitted; the endpoint's chain was reorganised deeper than the source reads. " +
		"Use more confirmations (e.g. confirmations=12) or finality=safe|finalized so only blocks that cannot be reorganised are read, " +
		"then resume this source under a new name with start_block set before the fork (rows from orphaned blocks already in the sink stay there)"
	remedyReorgDepth = "the source retracts reorganisations up to reorgDepth blocks deep; raise reorgDepth (at most 4096) " +
		"or read with confirmations so deeper ones stay invisible, then resume this source under a new name with start_block " +
		"set before the fork (rows of orphaned blocks already in the sink stay there)"
	remedySeam = "check that start_block is the archive's last block + 1 and that the endpoint serves the same chain as the archive " +
		"(start_parent_hash must be the archive's last block hash)"
	remedyParentHash = "pass start_parent_hash=0x<64 hex digits>: the hash of the block before start_block (the archive's last block hash; " +
		"gen-archive prints it, and it is the parent_hash column of the first live block)"
)
