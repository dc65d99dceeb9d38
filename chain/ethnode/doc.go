// Package ethnode is an embedded Ethereum JSON-RPC node that continues an
// archive's chain (package chain/archivegen) with the blocks of the chain
// model's continuation (chain.Next).
//
// Start continues the archive from lastBlock+1 with parent lastHash (empty
// withdrawals served, "from" served from the model's senders). Bodies
// (transactions, receipts, logs: chain.NextBody) are regenerated from
// (seed, header, branch) on each request instead of being stored; the
// transactions of the last Options.TxHistory blocks (default geth's
// --history.transactions, 2,350,000) are indexed by hash (receipts.go).
// Methods: eth_blockNumber,
// eth_getBlockByNumber (hex, latest, pending, safe = head-32, finalized =
// head-64, earliest = the node's first block), eth_getBlockByHash (blocks
// replaced by a reorg stay retrievable by hash), eth_chainId (0x1),
// eth_getBlockReceipts, eth_getTransactionReceipt and
// eth_getTransactionByHash (null off the canonical chain or older than
// TxHistory blocks, as geth answers), eth_getLogs (blockHash or a range of at most 10,000 blocks,
// address and topic filters, bloom-checked per block), in go-ethereum's
// encodings (types.Transaction, types.Receipt and types.Log JSON plus the
// fields of its RPCTransaction and MarshalReceipt), eth_syncing, net_version ("1"), web3_clientVersion, and batches, over
// HTTP and websocket, and over websocket eth_subscribe("newHeads") (heads.go:
// each new head's header; a reorg sends its new head only; the time each
// block was announced is kept for freshness, Node.AnnouncedAt;
// DropWebsockets closes every websocket, as a restarting node would). Archive blocks are not served (null). Every mined
// block reports the archive's last total difficulty (its day rebuilt at
// start), size, and the header's fields, so that the JSON-RPC source parses
// the row the archive writer would write for it: Node.ExportArchive writes
// mined blocks as archive files (one per date partition,
// part-00000-node-<first>-<last>-c000.snappy.parquet, the archive's schema
// era of the blocks) through the same row function as archivegen.Generate. The head
// advances by one block per BlockInterval/Speed of wall time (computed from
// elapsed time, at most 32 blocks per catch-up step), or only via Mine in
// Manual mode.
package ethnode
