package query

import (
	"fmt"

	"github.com/ethstream/ethstream/errcode"
)

// Error codes of the SQL front end (Spark's names where Spark has one).
const (
	// CodeParseSyntax: the text is not a query of the supported grammar.
	CodeParseSyntax = "PARSE_SYNTAX_ERROR"
	// CodeUnsupported: valid Spark SQL that ethstream does not run (a join,
	// HAVING, ORDER BY, arithmetic, ...); the message names the construct.
	CodeUnsupported = "UNSUPPORTED_SQL"
	// CodeUnresolvedColumn: a column name the input does not have.
	CodeUnresolvedColumn = "UNRESOLVED_COLUMN"
	// CodeTableNotFound: FROM names no source and no registered view
	// (Spark's TABLE_OR_VIEW_NOT_FOUND).
	CodeTableNotFound = "TABLE_OR_VIEW_NOT_FOUND"
	// CodeInvalidQuery: the query is well-formed but meaningless for a
	// streaming aggregation (a selected column missing from GROUP BY, ...).
	CodeInvalidQuery = "INVALID_STREAMING_QUERY"
)

// The SQL confs a query reads (Spark's keys and defaults).
const (
	// ConfANSI is spark.sql.ansi.enabled (default true, as in Spark 4).
	ConfANSI = "spark.sql.ansi.enabled"
	// ConfGroupByAliases is spark.sql.groupByAliases (default true).
	ConfGroupByAliases = "spark.sql.groupByAliases"
	// ConfGroupByOrdinal is spark.sql.groupByOrdinal (default true).
	ConfGroupByOrdinal = "spark.sql.groupByOrdinal"
)

// Confs are the conf keys the SQL front end reads.
var Confs = []string{ConfANSI, ConfGroupByAliases, ConfGroupByOrdinal}

// Supported summarises the grammar for error remedies.
const Supported = "supported: SELECT <group keys>, <aggregates> FROM blocks|<source name> " +
	"[WHERE <condition>] [GROUP BY [window(block_ts, '<size>'[, '<slide>'[, '<start>']]),] <columns or named expressions>]; " +
	"aggregates count(*), count, sum, min, max, avg, count_if, approx_count_distinct(x[, relativeSD]) of columns or expressions, FILTER (WHERE ...), AS aliases; " +
	"expressions with + - * / % div, comparisons, [NOT] IN, IS [NOT] NULL, [NOT] BETWEEN, [NOT] LIKE/RLIKE, AND, OR, NOT, " +
	"CASE, CAST, try_cast and the functions of docs/contracts.md"

func syntaxErr(src string, off int, format string, args ...any) error {
	return errcode.New(CodeParseSyntax, "", "fix the query; "+Supported,
		"syntax error at %s: %s", position(src, off), fmt.Sprintf(format, args...))
}

func unsupported(src string, off int, construct string) error {
	return errcode.New(CodeUnsupported, "", "rewrite the query without it; "+Supported,
		"%s is not supported (at %s)", construct, position(src, off))
}
