#!/bin/bash
# teaching.sh GLOB SOURCE: the README's four teaching queries (burned fees
# per hour, share of empty blocks per miner, gas utilisation, miners'
# sessions: DuckDB's by window functions, a new session where a miner's
# block comes more than the gap after its previous one) through
# ethstream (one batch, into a table under ./x) and through DuckDB (duckref
# sql) over the same files; prints, per query, how many lines of the sorted
# tables differ. ETHSTREAM and DUCKREF name the two binaries.
#   scripts/duckref/teaching.sh 'work/scripts/s3/aws-public-blockchain/v1.0/eth/blocks/*/*.parquet' \
#     "s3_backfill=s3archive:file://$PWD/work/scripts/s3/aws-public-blockchain/v1.0/eth/blocks"
set -u
ETHSTREAM=${ETHSTREAM:-ethstream}
DUCKREF=${DUCKREF:-duckref}
G=$1; A=$2; shift 2
run() { # name ethstream-query duckdb-query [flags]
  rm -rf x/$1; "$ETHSTREAM" run --checkpoint x/$1/cp --table x/$1/t --source "$A" --conf spark.sql.streaming.queryEvolution.enableSourceEvolution=true --trigger once "${@:4}" --query "$2" >/dev/null 2>x/$1.err || { cat x/$1.err | tail -2; return; }
  "$ETHSTREAM" table show x/$1/t | tail -n +2 | norm | sort > x/$1.eth
  "$DUCKREF" sql "$G" "$3" | tail -n +2 | norm | sort > x/$1.duck
  echo "$1: $(wc -l < x/$1.eth) rows ethstream, $(wc -l < x/$1.duck) rows duckdb, $(diff x/$1.eth x/$1.duck | grep -c '^[<>]') lines differ"
}
# norm rounds doubles to 12 significant digits: the sums' last bits depend
# on the order of the additions.
norm() { awk -F, -v OFS=, '{for(i=1;i<=NF;i++) if ($i ~ /^-?[0-9]+\.[0-9]+(e-?[0-9]+)?$/) $i=sprintf("%.12g",$i); print}'; }
mkdir -p x
run burned "SELECT date_trunc('HOUR', block_ts) AS hour, sum(base_fee_per_gas * gas_used / 1e18) AS burned_eth, count(*) AS blocks FROM blocks GROUP BY date_trunc('HOUR', block_ts)" \
  "SELECT date_trunc('hour', block_ts) AS hour, sum(base_fee_per_gas * gas_used / 1e18), count(*) FROM blocks GROUP BY 1" --output-mode complete
run empty "SELECT miner, count_if(transaction_count = 0) / count(*) AS empty_share, count(*) AS blocks FROM blocks GROUP BY miner HAVING count(*) > 40" \
  "SELECT miner, count(*), count_if(transaction_count = 0) / count(*) FROM blocks GROUP BY miner HAVING count(*) > 40" --output-mode complete
run util "SELECT window(block_ts, '1 hour') AS window, avg(gas_used / gas_limit) AS utilisation, CASE WHEN avg(IF(gas_used * 2 > gas_limit, 1, 0)) > 0.5 THEN 'full' ELSE 'light' END AS load FROM blocks GROUP BY window(block_ts, '1 hour')" \
  "SELECT time_bucket(INTERVAL 1 HOUR, block_ts) AS s, s + INTERVAL 1 HOUR, avg(gas_used / gas_limit), CASE WHEN avg(IF(gas_used * 2 > gas_limit, 1, 0)) > 0.5 THEN 'full' ELSE 'light' END FROM blocks GROUP BY 1"
run sessions "SELECT session_window.start AS session_start, session_window.end AS session_end, miner, count(*) AS blocks, sum(gas_used) AS gas FROM blocks GROUP BY session_window(block_ts, '2 minutes'), miner" \
  "WITH b AS (SELECT miner, block_ts, gas_used, CASE WHEN block_ts - lag(block_ts) OVER (PARTITION BY miner ORDER BY block_ts) <= INTERVAL 2 MINUTE THEN 0 ELSE 1 END AS new FROM blocks), s AS (SELECT *, sum(new) OVER (PARTITION BY miner ORDER BY block_ts ROWS UNBOUNDED PRECEDING) AS sid FROM b) SELECT min(block_ts), max(block_ts) + INTERVAL 2 MINUTE, miner, count(*), sum(gas_used) FROM s GROUP BY miner, sid" --output-mode complete
