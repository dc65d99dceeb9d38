package main

// duckref sparkref FILE: runs the differential test's queries (the
// -sparkref.duckdb file of ethstream's TestSparkRef, which runs this over
// its cases when given -duckref) in DuckDB and compares DuckDB's table with
// the one ethstream left; a disagreement is an error (exit status 1) after
// the summary.

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

type duckCase struct {
	Seed    uint64      `json:"seed"`
	SQL     string      `json:"sql"`
	Spark   string      `json:"spark"`
	Columns []duckCol   `json:"columns"`
	Rows    [][]*string `json:"rows"`
	Want    [][]*string `json:"want"`
	Error   string      `json:"error"`
}

type duckCol struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// sqlType is the raw table's column type of each case column type (the
// view blocks turns µs into TIMESTAMP, days into DATE and hex into BLOB).
var sqlType = map[string]string{"int64": "BIGINT", "float64": "DOUBLE", "string": "VARCHAR", "timestamp": "BIGINT",
	"timestamp_ntz": "BIGINT", "boolean": "BOOLEAN", "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER",
	"float": "FLOAT", "date": "INTEGER", "binary": "VARCHAR"}

// rawType is the raw table's type of a case column type: sqlType's, or
// DECIMAL(p,s) as written.
func rawType(t string) string {
	if strings.HasPrefix(t, "decimal(") {
		return strings.ToUpper(t)
	}
	return sqlType[t]
}

func sparkref(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection: the temp table is per connection
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var run, agreed, errorsAgreed int
	reasons := map[string][]string{}
	for sc.Scan() {
		var c duckCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return err
		}
		run++
		got, qerr := runCase(db, c)
		why := compare(c, got, qerr)
		switch {
		case why == "" && c.Error != "":
			errorsAgreed++
			agreed++
		case why == "":
			agreed++
		default:
			reason := why
			if i := strings.Index(why, ":"); i > 0 {
				reason = why[:i]
			}
			reasons[reason] = append(reasons[reason], fmt.Sprintf("seed %d: %s\n    spark:  %s\n    duckdb: %s", c.Seed, why, c.Spark, c.SQL))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Printf("duckdb: %d queries run, %d agreed (%d of them failing in both: an overflowing BIGINT sum), %d disagreed\n", run, agreed, errorsAgreed, run-agreed)
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %d: %s\n", len(reasons[k]), k)
		for i, ex := range reasons[k] {
			if i == 2 {
				break
			}
			fmt.Println("   ", ex)
		}
	}
	if agreed != run {
		return fmt.Errorf("%d of %d queries disagreed", run-agreed, run)
	}
	return nil
}

// runCase loads the rows into blocks, each with its arrival order __seq,
// and runs the query; timestamps are loaded as µs and dates as days and
// turned into TIMESTAMP and DATE by a view.
func runCase(db *sql.DB, c duckCase) ([][]any, error) {
	var defs, view, marks []string
	for _, col := range c.Columns {
		defs = append(defs, fmt.Sprintf(`"%s" %s`, col.Name, rawType(col.Type)))
		marks = append(marks, "?")
		switch col.Type {
		case "timestamp", "timestamp_ntz":
			view = append(view, fmt.Sprintf(`make_timestamp("%s") AS "%s"`, col.Name, col.Name))
		case "date":
			view = append(view, fmt.Sprintf(`CAST(DATE '1970-01-01' + "%s" AS DATE) AS "%s"`, col.Name, col.Name))
		case "binary": // loaded as hex
			view = append(view, fmt.Sprintf(`unhex("%s") AS "%s"`, col.Name, col.Name))
		default:
			view = append(view, fmt.Sprintf(`"%s"`, col.Name))
		}
	}
	defs, marks, view = append(defs, "__seq BIGINT"), append(marks, "?"), append(view, "__seq")
	for _, s := range []string{"DROP VIEW IF EXISTS blocks", "DROP TABLE IF EXISTS raw",
		"CREATE TABLE raw (" + strings.Join(defs, ", ") + ")",
		"CREATE VIEW blocks AS SELECT " + strings.Join(view, ", ") + " FROM raw"} {
		if _, err := db.Exec(s); err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	ins, err := db.Prepare("INSERT INTO raw VALUES (" + strings.Join(marks, ", ") + ")")
	if err != nil {
		return nil, err
	}
	defer ins.Close()
	for seq, r := range c.Rows {
		args := make([]any, len(r)+1)
		args[len(r)] = int64(seq)
		for i, v := range r {
			if v == nil {
				continue
			}
			switch c.Columns[i].Type {
			case "int64", "timestamp", "timestamp_ntz", "tinyint", "smallint", "int", "date":
				args[i], _ = strconv.ParseInt(*v, 10, 64)
			case "boolean":
				args[i] = *v == "1"
			case "float64", "float":
				args[i], _ = strconv.ParseFloat(*v, 64)
			default:
				args[i] = *v
			}
		}
		if _, err := ins.Exec(args...); err != nil {
			return nil, err
		}
	}
	rows, err := db.Query(c.SQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// cell renders a DuckDB value as the case file's tagged cells.
func cell(v any) *string {
	var s string
	switch v := v.(type) {
	case nil:
		return nil
	case int64:
		s = "i:" + strconv.FormatInt(v, 10)
	case int32:
		s = "i:" + strconv.FormatInt(int64(v), 10)
	case float64:
		s = "f:" + strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		s = "s:" + v
	default:
		s = fmt.Sprintf("?:%T %v", v, v)
	}
	return &s
}

func show(c *string) string {
	if c == nil {
		return "NULL"
	}
	return *c
}

func sameCell(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	if strings.HasPrefix(*a, "f:") && strings.HasPrefix(*b, "f:") {
		x, _ := strconv.ParseFloat((*a)[2:], 64)
		y, _ := strconv.ParseFloat((*b)[2:], 64)
		return x == y || math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y))
	}
	return *a == *b
}

func compare(c duckCase, got [][]any, qerr error) string {
	if c.Error != "" {
		if qerr == nil {
			return "ethstream failed, duckdb did not: " + c.Error
		}
		return ""
	}
	if qerr != nil {
		return "duckdb error: " + qerr.Error()
	}
	var rows [][]*string
	for _, r := range got {
		var row []*string
		for _, v := range r {
			row = append(row, cell(v))
		}
		rows = append(rows, row)
	}
	key := func(r []*string) string {
		var b []string
		for _, v := range r {
			b = append(b, show(v))
		}
		return strings.Join(b, "|")
	}
	if len(rows) != len(c.Want) {
		return fmt.Sprintf("row count: duckdb %d rows, ethstream %d", len(rows), len(c.Want))
	}
	// Match each of ethstream's rows with a row of DuckDB's not matched yet
	// whose every cell is the same (doubles to 1e-9): tables are multisets,
	// a double may be a key, and a projection may repeat a row.
	used := make([]bool, len(rows))
	for _, w := range c.Want {
		found := false
		for i, g := range rows {
			if used[i] || len(g) != len(w) {
				continue
			}
			same := true
			for j := range w {
				same = same && sameCell(g[j], w[j])
			}
			if same {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return "values: ethstream row " + key(w) + " not in duckdb's"
		}
	}
	return ""
}
