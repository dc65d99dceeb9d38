// Command duckref times DuckDB's plain GROUP BY over the archive files: the
// reference the backfill target of docs/contracts.md (Targets) is stated against.
package main

import (
	"database/sql"
	"fmt"
	"os"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "sparkref" {
		if err := sparkref(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "duckref:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: duckref 'ROOT/v1.0/eth/blocks/*/*.parquet' | duckref sparkref CASES.jsonl")
		os.Exit(2)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		panic(err)
	}
	q := fmt.Sprintf(`SELECT count(*), sum(c) FROM (
	  SELECT time_bucket(INTERVAL 5 MINUTE, "timestamp") AS w, miner, count(*) AS c
	  FROM read_parquet('%s') GROUP BY ALL)`, os.Args[1])
	t := time.Now()
	var groups, blocks int64
	if err := db.QueryRow(q).Scan(&groups, &blocks); err != nil {
		panic(err)
	}
	fmt.Printf("duckdb: %d blocks, %d (window, miner) groups in %.2f s\n", blocks, groups, time.Since(t).Seconds())
}
