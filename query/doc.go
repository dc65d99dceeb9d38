// Package query is ethstream's SQL front end: it parses a streaming
// aggregation in Spark SQL syntax and resolves it against the relations
// its caller registers into what the engine runs (an agg.Spec, a
// filter.Predicate run before it and the part of it that runs before the
// watermark, the sources read and the columns they must decode). It knows
// no relation name of its own: the ethereum pipeline registers the view
// blocks (the union by name of every --source, each row with the literal
// column source) and each source under its own name.
//
// # Grammar
//
//	query     := SELECT item {, item} FROM relation [WHERE expr]
//	             [GROUP BY group {, group}] [HAVING expr] [;]
//	relation  := <registered name> | `quoted`          (case-insensitive)
//	item      := window(col, dur[, dur[, dur]]) [AS window] | window
//	           | session_window(col, gap) | session_window
//	           | session_window.(start|end) [[AS] alias]
//	           | expr [[AS] alias]
//	group     := window(col, dur[, dur[, dur]]) | session_window(col, gap)
//	           | expr | <SELECT alias> | <SELECT ordinal>
//	gap       := dur | expr                       (a string per row)
//	dur       := 'interval string' | INTERVAL 'string' | INTERVAL 'n' unit
//	           | INTERVAL n unit {n unit}
//	expr      := expr OR expr | expr AND expr | NOT expr
//	           | value cmp value | value [NOT] IN (literal {, literal})
//	           | value IS [NOT] NULL | value [NOT] BETWEEN value AND value
//	           | value [NOT] (LIKE | RLIKE | REGEXP) value | value
//	cmp       := = | == | <> | != | < | <= | > | >=
//	value     := value (+ | - | ||) value | value (* | / | % | DIV) value
//	           | - value | (expr) | col | literal | INTERVAL ... | call
//	           | CASE [expr] WHEN expr THEN expr {...} [ELSE expr] END
//	           | CAST(expr AS type) | TRY_CAST(expr AS type)
//	call      := name(expr {, expr}) | count(*) | agg [FILTER (WHERE expr)]
//	literal   := 'string' | number | -number | true | false | null
//	           | TIMESTAMP 'yyyy-mm-dd hh:mm:ss' | DATE 'yyyy-mm-dd'
//
// An aggregate (count, sum, min, max, avg/mean, count_if) takes a column
// or an expression; a SELECT item or HAVING may compute over aggregates
// and group keys. Expressions are package expr's (Spark's types, implicit
// casts and ANSI errors; the functions in docs/contracts.md). Expressions
// before the aggregation become derived columns (Compiled.Derived: group
// expressions, named by their SELECT alias, and aggregates' inputs); those
// over its output run in Compiled.Post.
//
// session_window(col, gap) is Spark's session window (query/session.go,
// package session; docs/contracts.md, Session windows): the step is an
// Aggregation with Session set, output session_window_start and
// session_window_end, or the names session_window.start AS x and
// session_window.end AS y give them.
//
// window(col, size, slide, startTime) is Spark's: windows start at the
// epoch plus startTime (below the slide) plus a multiple of the slide.
// Durations are Spark interval strings (package interval: '5 minutes',
// '1 hour', '2 days', 'interval 10 seconds') or INTERVAL literals, compared
// by value: window(ts, '1 hour') and window(ts, INTERVAL 60 MINUTES) are
// the same window. Without GROUP BY the query is a global aggregation (its
// items are aggregates only), unless no item is an aggregate or a window:
// SELECT col, ... FROM rel [WHERE ...] has no stateful operator
// (Compiled.Select; Compiled.Stateful is false), appends the rows the
// WHERE keeps in outputMode append only, and renames no column. A
// relation's columns are those every source it reads declares
// (Options.Schemas), plus the literal source. Timestamps compare with
// strings in UTC.
//
// # Lexical rules (Spark's SqlBaseLexer)
//
// Identifiers resolve case-insensitively; an alias keeps its case (AS
// AVG_TX is the column AVG_TX). A string literal ends at its first
// unescaped quote and its escapes are unescapeSQLString's: \0 \b \n \r \t
// \Z, \uXXXX (UTF-16 units, pairs combine), \UXXXXXXXX, octal \[01][0-7][0-7],
// \% and \_ kept for LIKE, any other escaped character as itself; r'...'
// is raw. Adjacent literals are one ('a' 'b' and 'a”b' are 'ab'). Comments
// are -- to the end of the line and /* */, which nest. Numbers are typed as
// AstBuilder types them: an integer is BIGINT when it fits, else DECIMAL;
// 1.5 is DECIMAL; 1.5e3 DOUBLE; the suffixes L, S, Y, D, F, BD force a type
// and a value outside it is PARSE_SYNTAX_ERROR. In a comparison a string
// literal is cast to the column's type (AnsiStringPromotionTypeCoercion:
// BIGINT, DOUBLE, TIMESTAMP) and an integer column compares with a DECIMAL
// exactly (package filter).
//
// # Output
//
// The output (and the Delta table) has, in this order: the window (a struct
// window<start, end> in the table), the group keys in GROUP BY order, the
// aggregates in SELECT order, then the expressions over aggregates. Every group key and the window must be
// selected, under their own names; the order of the non-aggregate SELECT
// items does not matter (the same output schema). An aggregate without an
// alias is named count (count(*)) or <func>_<column> (sum_gas_used).
//
// Spark's withWatermark(column, delay) and outputMode(mode) are options
// beside the text (Options; the CLI's --with-watermark and --output-mode).
// A watermark on a windowed aggregation must be on the window's event-time
// column; on one without a window it closes nothing (Spark allows it in
// update and complete mode), and the engine still computes and reports it.
// spark.sql.ansi.enabled, spark.sql.groupByAliases and
// spark.sql.groupByOrdinal are honoured (Options; default true each).
//
// # Evaluation order
//
// Spark's optimizer (PushPredicateThroughNonJoin) splits the WHERE at its
// top-level ANDs and moves each deterministic conjunct that does not read
// the watermark's event-time column below EventTimeWatermark: the
// watermark is then computed from the rows those conjuncts keep, and the
// conjuncts that read the event time (and an OR joining one with others)
// apply after it. Compiled.PreWatermark holds the pushed conjuncts; the
// engine's read path takes the event time only of the rows they keep
// (engine.Query.PreWatermark) and runs the whole WHERE before the
// aggregation (engine.Query.Where). Worked example, with
// withWatermark(block_ts, 1 hour):
//
//	WHERE number < 1000 AND block_ts >= '2024-01-01'
//	  before the watermark:  number < 1000
//	  after it:              block_ts >= '2024-01-01'
//
// Over blocks 0..1999 where block 1999 is 6 hours after block 999, the next
// watermark is max(block_ts of blocks 0..999) - 1 hour: the windows of
// blocks 0..999 stay open for late rows. Computed from every row read it
// would be 5 hours later and close them.
//
// An OR that reads the event time is one conjunct, not split, and a
// conjunct on the event time is never pushed:
//
//	WHERE number < 1000 AND (miner = '0xaa' OR block_ts >= '2024-01-01')
//	      AND block_ts < '2025-01-01'
//	  before the watermark:  number < 1000
//	  after it:              (miner = '0xaa' OR block_ts >= '2024-01-01')
//	                         AND block_ts < '2025-01-01'
//
// so block 5 of 2026 raises the watermark though the WHERE drops it, as in
// Spark. internal/sparkref's oracle implements the rule independently and
// pipeline's TestSparkRef compares the two on generated queries.
//
// # Errors
//
// PARSE_SYNTAX_ERROR (with line:column, counted in characters) for text
// outside the grammar, UNSUPPORTED_SQL naming the construct for valid
// Spark SQL that does not run here (joins, named as such, ORDER BY, LIMIT,
// DISTINCT, subqueries, a Spark aggregate ethstream lacks),
// UNRESOLVED_ROUTINE listing the functions for an unknown function,
// DATATYPE_MISMATCH for operands of the wrong type, TABLE_OR_VIEW_NOT_FOUND for a FROM name nothing registered,
// UNRESOLVED_COLUMN for an unknown column, INVALID_STREAMING_QUERY for a
// query that cannot be a streaming aggregation (a selected column outside
// GROUP BY, a group key not selected, GROUP BY an aggregate), with Spark's
// reason. Every remedy lists what is supported. Non-ASCII text in a
// message is shown as written.
//
// A hand-written recursive-descent parser: the Go SQL parsers (vitess,
// TiDB, CockroachDB's, pg_query) implement MySQL or PostgreSQL, where
// WINDOW is a reserved word, so Spark's window(block_ts, '5 minutes') does
// not parse there, and their errors cannot name the unsupported construct.
package query
