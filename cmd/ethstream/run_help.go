package main

// The long help of `ethstream run`. TestRunHelpIsComplete checks it against
// the parsers: every s3archive and ethrpc URI option they accept, every conf
// key the engine reads and every trigger spelling is described here, and
// every example parses.

const runLong = `run starts a query on a checkpoint and a Delta table and runs micro-batches until its
trigger says stop. Without --query it is the reference query: blocks per 5-minute window
per (source, miner), under a 2-day watermark, update mode, MERGEd into the table on
(window, source, miner). --query 'SELECT ...' (or --query-file) runs your own query in
Spark SQL (see QUERY below); a restart whose query shape differs from the one recorded in
the checkpoint is decided by the restart rules ('ethstream plan' shows the diff).

Every start is a restart of the same query. An uncommitted batch re-runs first, with its
recorded offsets; then each named source resumes from its own committed offset, a name the
checkpoint has never seen starts from its configured start, and a name that is missing is
tombstoned (and can never come back). Every refusal is decided from a read of the
checkpoint before anything is opened or written: nothing is created, not even the directory
or its .lock. A checkpoint whose state another state store provider wrote (Apache Spark's
HDFS-backed or RocksDB store) is refused with STATE_PROVIDER_UNSUPPORTED; 'ethstream
checkpoint inspect' still reads it. 'ethstream plan' with the same flags prints what a start
would do.

QUERY  --query 'SELECT ...' or --query-file FILE (Spark SQL; default: the reference query)

  SELECT window(block_ts, '5 minutes'[, 'SLIDE']), miner, count(*), sum(gas_used) AS gas
  FROM blocks | FROM <source name>       blocks: every --source, with the column source
  [WHERE transaction_count > 100 AND miner IN ('0x..') AND NOT gas_used IS NULL ...]
  GROUP BY window(block_ts, '5 minutes'), miner
    aggregates: count(*), count, sum, min, max, avg, count_if of columns or expressions,
    FILTER (WHERE ...); group keys: block columns, source, or expressions named with AS;
    expressions (Spark's types and ANSI errors): + - * / % div, comparisons, AND/OR/NOT, IN,
    BETWEEN, IS [NOT] NULL, LIKE, RLIKE, CASE, IF, COALESCE, CAST, try_cast, string, date,
    math and chain functions; SELECT over aggregates (sum(x) / 1e18 AS eth) and HAVING.
  SELECT number, miner, gas_used FROM <source name> [WHERE ...]
    no aggregation: each batch appends the rows the WHERE keeps (--output-mode append;
    no state).
  --with-watermark 'block_ts, 1 hour'    Spark's withWatermark (default: 'block_ts, 48 hours' for
                                         the reference query, none for a --query)
  --output-mode update|append|complete   Spark's outputMode (default update)
  --drop-duplicates 'hash'               Spark's dropDuplicates on the unioned rows, before the query;
                                         with a join, on the relations: 'a.hash' one, 'hash' each
  --drop-duplicates-within-watermark 'hash'
                                         Spark's dropDuplicatesWithinWatermark (needs a watermark)
  Anything else is UNSUPPORTED_SQL naming the construct. The shape is recorded in the
  checkpoint; a restart with another shape follows the restart rules (plan shows the diff).

SOURCES  --source NAME=FORMAT:URI, repeatable, in plan order (NAME empty: unnamed source)

  s3archive:s3://BUCKET/PREFIX?KEY=VALUE&...   daily Parquet files under PREFIX/date=YYYY-MM-DD/
  s3archive:file:///ABS/PATH?KEY=VALUE&...     the same layout on a local disk (no S3 keys)
    endpoint=URL              custom S3 endpoint, e.g. http://127.0.0.1:9000 (default: AWS)
    region=REGION             bucket region (default: AWS_REGION, else us-east-1; the public
                              bucket s3://aws-public-blockchain is in us-east-2)
    anonymous=true|false      unsigned requests, for public buckets (default false: the AWS
                              credential chain)
    pathStyle=true|false      address buckets as ENDPOINT/BUCKET/KEY (default: true when
                              endpoint is set)
    maxFilesPerTrigger=N      new files admitted per batch (default 0: all)
    maxBytesPerTrigger=N      bytes admitted per batch, at least one file (default 0: no limit)
    parallelism=N             files fetched and decoded at once (default 4 for file://, 8 for s3://)
    skipUnreadable=true|false skip files failing with ARCHIVE_FILE_UNREADABLE instead of
                              failing the batch; they are listed in the progress metrics
                              (default false)
    listPageSize=N            keys per LIST page (default 0: the server's, 1000)
    timeout=DUR               per store request, body included (default 30s)
    batchTimeout=DUR          everything one batch asks of the store, retries included
                              (default 10m): a store that never answers fails the batch
    movedFrom=LOCATION        the archive moved from LOCATION (URL-encoded): admitted when
                              every file the source log records is at the new location with
                              its logged size; recorded, so needed on one start only

  ethrpc:URL?KEY=VALUE&...   an Ethereum JSON-RPC endpoint over http, https, ws or wss
    maxBlocksPerTrigger=N     blocks per batch (default 20)
    start_block=N             first block, used only while the checkpoint has no offset for
                              this name (default 0: the readable head)
    start_parent_hash=0xHASH  the first block's parent hash must equal it, e.g. the archive's
                              last hash (SEAM_MISMATCH otherwise)
    overlap=K                 start K blocks before start_block, which the archive holds too;
                              start_parent_hash is checked at block start_block; needs
                              --drop-duplicates(-within-watermark) 'hash'
    confirmations=N           read only blocks at least N below the head (default 0)
    finality=safe|finalized   read only blocks at or below that tag's block (default: none)
    endpoints=URL,URL         further endpoints, tried in order when one fails (URL-encode one
                              that has its own query string, e.g. an API key)
    maxBatchSize=N            calls per JSON-RPC batch request (default 100; halved when an
                              endpoint refuses the size)
    parallelism=N             batch requests in flight for one range (default 4)
    timeout=DUR               per request, a Go duration (default 10s)
    batchTimeout=DUR          everything one batch asks of the endpoints, retries included
                              (default 30s): a silent endpoint is RPC_UNAVAILABLE after it
    maxRetries=N              retries of one call across all endpoints (default 8)
    reorg=fail|retract        when the chain no longer holds a block already read: stop with
                              REORG_DETECTED (fail, the default), or retract the orphaned
                              blocks' rows and insert the canonical ones in the same batch
    reorgDepth=N              the deepest reorganisation retract undoes (default 64, at most
                              4096); a deeper one is REORG_DETECTED
    maxResponseSize=SIZE      bytes of one JSON-RPC answer, or with KiB, MiB, GiB (default
                              64MiB): a larger one is RPC_RESPONSE_TOO_LARGE, read no further
    subscribe=auto|off        auto (default): follow eth_subscribe("newHeads") over the first
                              ws:// or wss:// endpoint, redialled with backoff when dropped, to
                              wake --trigger realTime; blocks are still read by number and
                              checked. off, or no ws endpoint: poll
  The snake_case and camelCase spellings are both accepted: startBlock, startParentHash,
  max_blocks_per_trigger, max_batch_size, max_retries, reorg_depth, max_response_size. An
  unknown key is an error.

  parquet:|json:|csv:LOCATION?KEY=VALUE&...   a directory of files of any schema (Spark's
                              readStream.format), LOCATION file:///ABS/PATH or s3://BUCKET/PREFIX
                              (the S3 keys above); key=value directories are partition columns
    schema=DDL                the schema, URL-encoded: order_id STRING, amount DOUBLE, ...
                              (required unless spark.sql.streaming.schemaInference=true)
    maxFilesPerTrigger, maxBytesPerTrigger, latestFirst, maxFileAge, pathGlobFilter,
    recursiveFileLookup, parallelism; json, csv: mode, columnNameOfCorruptRecord,
    timestampFormat; csv: header, sep, quote, escape, nullValue, inferSchema
  delta:LOCATION?KEY=VALUE&...  a Delta table (Delta's streaming source and offsets)
    maxFilesPerTrigger (default 1000), maxBytesPerTrigger, startingVersion=N|latest,
    startingTimestamp, ignoreDeletes, ignoreChanges, skipChangeCommits, parallelism
  Options and Spark's behaviour for these: docs/contracts.md, Configuration.

CONF  --conf KEY=VALUE, repeatable (Spark's names and meanings)

  spark.sql.streaming.queryEvolution.enableSourceEvolution=true|false
        named sources, offset log V2, tombstones (default false). Fixed when the checkpoint
        is created: a different value on restart is CONFIG_MISMATCH.
  spark.sql.streaming.offsetLog.formatVersion=1|2
        offset log version of a new checkpoint (default 1; 2 with source evolution).
  spark.sql.shuffle.partitions=N
        state partitions of a new checkpoint (default 200). Pinned in the checkpoint: on
        restart a different value is ignored with a warning and does not resize the state.
  spark.sql.streaming.stateStore.partitions=N
        repartition the state to N partitions: a REPARTITION control batch runs first.
  spark.sql.streaming.stateStore.providerClass=pebble
        the state store provider (pebble is the only one; pinned).
  spark.sql.streaming.minBatchesToRetain=N
        offset, commit and state versions kept (default 100).
  spark.sql.streaming.noDataMicroBatches.enabled=true|false
        run a batch without new data when the watermark would evict state (default true).
  spark.sql.streaming.multipleWatermarkPolicy=min|max
        how the watermarks of several inputs (a join's sides) combine into the query's
        (default min: the slowest input; max: the fastest, dropping more of the others' rows).

TRIGGERS  --trigger (Spark's spellings; the hyphenated ones are accepted too)

  availableNow (or available-now)  read everything available at the start, in batches of the
                                   sources' limits, then stop
  once                             one batch, then stop
  processingTime=DUR (or processing-time=DUR)
                                   a batch every DUR (500ms, 2s, 1m, or Spark's '5 seconds')
                                   until --max-batches data batches ran or the process is
                                   interrupted (Ctrl-C: the batch in flight is abandoned and
                                   re-runs at the next start)
  realTime (or real-time)          a batch as soon as a new head is readable: woken by the
                                   sources' notifications (ethrpc newHeads over ws), else
                                   polling every 100ms (realTime=DUR: every DUR); one batch
                                   per new head, not Spark's long-running real-time batches

On a terminal, a status line shows the batch, files read of the total, blocks, the rate and
the ETA, with log lines above it; elsewhere each batch is one log line.`

const runExample = `  # The lifecycle on one checkpoint and one table, each phase a restart (the embedded
  # endpoints: 'ethstream serve-s3' on 127.0.0.1:9000 and 'ethstream node' on 127.0.0.1:8545).
  EVOLUTION='--conf spark.sql.streaming.queryEvolution.enableSourceEvolution=true'
  S3='s3_backfill=s3archive:s3://aws-public-blockchain/v1.0/eth/blocks?endpoint=http://127.0.0.1:9000&anonymous=true&maxFilesPerTrigger=5'
  # LAST_BLOCK and LAST_HASH: the archive's last block (gen-archive prints both; they are
  # lastBlock and lastHash in its manifest.json)
  LIVE="eth_live=ethrpc:http://127.0.0.1:8545?maxBlocksPerTrigger=20&start_block=$((LAST_BLOCK + 1))&start_parent_hash=$LAST_HASH&confirmations=0"

  # 1. backfill the archive with wide state, then stop
  ethstream run --checkpoint ck --table tbl --source "$S3" $EVOLUTION --conf spark.sql.shuffle.partitions=200 --trigger available-now
  # 2. add the live source: the archive resumes at its offset and reads nothing new
  ethstream run --checkpoint ck --table tbl --source "$S3" --source "$LIVE" $EVOLUTION --trigger processing-time=2s --max-batches 16
  # 3. retire the archive: its name is tombstoned, its state stays until the watermark closes it
  ethstream run --checkpoint ck --table tbl --source "$LIVE" $EVOLUTION --trigger processing-time=2s --max-batches 8
  # 4. re-adding the retired name is refused (TOMBSTONE_SOURCE_NAME_REUSE); plan says so without running
  ethstream plan --checkpoint ck --source "$LIVE" --source "$S3" $EVOLUTION
  # 5. shrink the state to 8 partitions (a REPARTITION control batch), then follow the chain
  ethstream run --checkpoint ck --table tbl --source "$LIVE" $EVOLUTION --conf spark.sql.streaming.stateStore.partitions=8 --trigger processing-time=2s

  # The public archive and a public endpoint (see the README for the live continuation)
  ethstream run --checkpoint ck --table tbl $EVOLUTION \
    --source 's3_backfill=s3archive:s3://aws-public-blockchain/v1.0/eth/blocks?region=us-east-2&anonymous=true&maxFilesPerTrigger=365' \
    --trigger available-now`
