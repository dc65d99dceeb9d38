// Command duckref times DuckDB over the archive files: the yardsticks the
// backfill target of docs/contracts.md (Targets) is stated against.
//
//	duckref GLOB            the plain GROUP BY, its answer scanned back (kept for continuity)
//	duckref copy GLOB OUT   the same job as the backfill: read, group, write the grouped
//	                        result to the Parquet file OUT (the fair yardstick)
//	duckref copysql OUT SQL a query shape's batch job (ethstream bench --shape): SQL's
//	                        result written to the Parquet file OUT
//	duckref sparkref CASES  the differential cases (sparkref.go)
//	duckref sql GLOB QUERY  QUERY over the archive files as the view blocks, as CSV
//	duckref table GLOB QUERY  QUERY over any Parquet files as the view t, as CSV
//	                        (the orders example's check: ethstream demo --example orders --duckdb)
package main

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

// groupBy is the reference query's aggregation in DuckDB: five-minute
// tumbling windows by miner, counted.
const groupBy = `SELECT time_bucket(INTERVAL 5 MINUTE, "timestamp") AS w, miner, count(*) AS c
	  FROM read_parquet('%s') GROUP BY ALL`

func main() {
	var err error
	switch {
	case len(os.Args) == 3 && os.Args[1] == "sparkref":
		err = sparkref(os.Args[2])
	case len(os.Args) == 4 && os.Args[1] == "sql":
		err = query(os.Args[2], os.Args[3], blocksView)
	case len(os.Args) == 4 && os.Args[1] == "table":
		err = query(os.Args[2], os.Args[3], tableView)
	case len(os.Args) == 4 && os.Args[1] == "copy":
		err = copyGrouped(os.Args[2], os.Args[3])
	case len(os.Args) == 4 && os.Args[1] == "copysql":
		err = copySQL(os.Args[2], os.Args[3])
	case len(os.Args) == 2:
		err = plain(os.Args[1])
	default:
		fmt.Fprintln(os.Stderr, "usage: duckref 'ROOT/v1.0/eth/blocks/*/*.parquet' | duckref copy GLOB OUT.parquet | duckref sparkref CASES.jsonl | duckref sql GLOB QUERY | duckref table GLOB QUERY")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "duckref:", err)
		os.Exit(1)
	}
}

// plain runs the GROUP BY and scans back only its group and block counts.
func plain(glob string) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	q := `SELECT count(*), sum(c) FROM (` + fmt.Sprintf(groupBy, glob) + `)`
	t := time.Now()
	var groups, blocks int64
	if err := db.QueryRow(q).Scan(&groups, &blocks); err != nil {
		return err
	}
	fmt.Printf("duckdb: %d blocks, %d (window, miner) groups in %.2f s\n", blocks, groups, time.Since(t).Seconds())
	return nil
}

// copyGrouped does what the backfill does, the grouped result written to a
// Parquet file rather than scanned back; COPY's row count is the group count
// (nothing is read back, so the process's time is the job's alone).
func copyGrouped(glob, out string) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	q := `COPY (` + fmt.Sprintf(groupBy, glob) + fmt.Sprintf(`) TO '%s' (FORMAT parquet)`, out)
	// The bench prints DuckDB's parallelism beside its figures: DuckDB
	// runs a thread per core it sees, so a ratio moves with the core count.
	var threads string
	if err := db.QueryRow(`SELECT current_setting('threads')`).Scan(&threads); err != nil {
		return err
	}
	t := time.Now()
	r, err := db.Exec(q)
	if err != nil {
		return err
	}
	groups, err := r.RowsAffected()
	if err != nil {
		return err
	}
	fmt.Printf("duckdb copy: %d (window, miner) groups written to %s in %.2f s (threads %s)\n", groups, out, time.Since(t).Seconds(), threads)
	return nil
}

// copySQL writes q's result to the Parquet file out, and prints its row
// count, time and DuckDB's thread count.
func copySQL(out, q string) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	var threads string
	if err := db.QueryRow(`SELECT current_setting('threads')`).Scan(&threads); err != nil {
		return err
	}
	t := time.Now()
	r, err := db.Exec(`COPY (` + q + fmt.Sprintf(`) TO '%s' (FORMAT parquet)`, out))
	if err != nil {
		return err
	}
	rows, err := r.RowsAffected()
	if err != nil {
		return err
	}
	fmt.Printf("duckdb copysql: %d rows written to %s in %.2f s (threads %s, peak RSS %d kB)\n", rows, out, time.Since(t).Seconds(), threads, peakRSSKB())
	return nil
}

// peakRSSKB is this process's peak resident set (VmHWM, Linux), 0 if
// unknown: the bench reads DuckDB's memory from it, since the kernel's
// maxrss of a child counts its parent's pages at the fork.
func peakRSSKB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(rest, &kb)
			return kb
		}
	}
	return 0
}

// query runs a query over the view blocks (the archive's files, its
// timestamp column renamed block_ts as ethstream reads it, in UTC) and
// prints its rows as CSV: the cross-check of a query's table (`ethstream
// table show`), for the queries whose semantics DuckDB shares.
// The views a query runs over: blocks (the archive, its timestamp as
// block_ts) or t (any Parquet files as they are, e.g. a Delta table's data
// files when its log only appended).
const (
	blocksView = `CREATE VIEW blocks AS SELECT * EXCLUDE ("timestamp"), "timestamp" AS block_ts FROM read_parquet('%s')`
	tableView  = `CREATE VIEW t AS SELECT * FROM read_parquet('%s')`
)

func query(glob, q, view string) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`SET TimeZone = 'UTC'`); err != nil {
		return err
	}
	if _, err := db.Exec(fmt.Sprintf(view, glob)); err != nil {
		return err
	}
	rows, err := db.Query(q)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	fmt.Println(strings.Join(cols, ","))
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		out := make([]string, len(vals))
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
			case time.Time:
				out[i] = v.UTC().Format(time.RFC3339)
			default:
				out[i] = fmt.Sprint(v)
			}
		}
		fmt.Println(strings.Join(out, ","))
	}
	return rows.Err()
}
