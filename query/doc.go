// Package query is ethstream's SQL front end: it parses a streaming
// aggregation in Spark SQL syntax and resolves it against the query's
// sources into what the engine runs (an agg.Spec, a filter.Predicate run
// before it, the sources read and the columns they must decode).
//
// # Grammar
//
//	query     := SELECT item {, item} FROM source [WHERE cond]
//	             GROUP BY group {, group} [;]
//	source    := blocks | <source name> | `quoted`
//	item      := window(col, 'size'[, 'slide']) [AS window] | window
//	           | col | agg [[AS] alias]
//	agg       := count(*) | count(1) | count(col) | sum(col) | min(col)
//	           | max(col) | avg(col) | mean(col)
//	group     := window(col, 'size'[, 'slide']) | col
//	cond      := cond OR cond | cond AND cond | NOT cond | (cond)
//	           | operand cmp operand | operand [NOT] IN (literal {, literal})
//	           | operand IS [NOT] NULL | operand [NOT] BETWEEN operand AND operand
//	cmp       := = | == | <> | != | < | <= | > | >=
//	operand   := col | 'string' | number | -number | true | false | null
//	           | TIMESTAMP 'yyyy-mm-dd hh:mm:ss' | DATE 'yyyy-mm-dd'
//
// FROM blocks reads the union by name of every --source stream, each row
// with the literal column source (the source's name); FROM <name> reads
// that one source. Identifiers are case-insensitive. Durations are Spark
// interval strings ('5 minutes', '1 hour', '2 days', 'interval 10 seconds').
// Timestamps compare with strings in UTC.
//
// # Output
//
// The output (and the Delta table) has, in this order: the window (a struct
// window<start, end> in the table), the group keys in GROUP BY order, then
// the aggregates in SELECT order. Every group key and the window must be
// selected, under their own names; the order of the non-aggregate SELECT
// items does not matter (the same output schema). An aggregate without an
// alias is named count (count(*)) or <func>_<column> (sum_gas_used).
//
// Spark's withWatermark(column, delay) and outputMode(mode) are options
// beside the text (Options; the CLI's --with-watermark and --output-mode).
// A watermark must be on the window's event-time column.
//
// # Errors
//
// PARSE_SYNTAX_ERROR (with line:column) for text outside the grammar,
// UNSUPPORTED_SQL naming the construct for valid Spark SQL that does not
// run here (joins, HAVING, ORDER BY, LIMIT, DISTINCT, arithmetic, CASE,
// CAST, subqueries, other functions), UNRESOLVED_COLUMN for an unknown
// column or source, INVALID_STREAMING_QUERY for a query that cannot be a
// streaming aggregation (no GROUP BY, a selected column outside GROUP BY, a
// group key not selected). Every remedy lists what is supported.
//
// A hand-written recursive-descent parser: the Go SQL parsers (vitess,
// TiDB, CockroachDB's, pg_query) implement MySQL or PostgreSQL, where
// WINDOW is a reserved word, so Spark's window(block_ts, '5 minutes') does
// not parse there, and their errors cannot name the unsupported construct.
package query
