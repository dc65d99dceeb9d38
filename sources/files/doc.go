// Package files is Spark's FileStreamSource over a directory of Parquet,
// JSON-lines or CSV files of any schema (spark.readStream.format("parquet"
// | "json" | "csv").schema(...).load(path)), on the local disk or S3,
// spelled --source NAME=FORMAT:LOCATION?OPTIONS with FORMAT parquet, json
// or csv and LOCATION file:///ABS/PATH or s3://BUCKET/PREFIX (with the
// connection options endpoint, region, anonymous, pathStyle).
//
// # Admission and the source log
//
// The machinery is the archive source's (package filelog): every trigger
// lists the directory, orders the files by modification time (then URI;
// Spark sorts by modification time), and admits the files never admitted
// before, up to maxFilesPerTrigger files and maxBytesPerTrigger bytes (a
// soft cap), as log id n of Spark's FileStreamSource log under
// <checkpoint>/sources/<key>/ (format: package s3archive's doc, Source log
// format, version 1; "v1" then one {"path","timestamp","batchId","size"}
// line per file, <n>.compact every 10 ids). The offset is
// {"logOffset":n}. latestFirst admits the newest files first; maxFileAge
// drops new files older than the newest admitted file by more than it
// (Spark's SeenFilesMap; ignored with latestFirst and maxFilesPerTrigger
// both set). availableNow admits only files present when the run starts.
// pathGlobFilter keeps files whose name matches a glob. Names starting
// with "_" or "." are skipped in every path component.
//
// # Schema
//
// The schema is the schema= option in Spark's DDL form (package ddl), or,
// with --conf spark.sql.streaming.schemaInference=true, inferred from the
// files present at the start: Parquet from the first file's footer, CSV
// from the first line (names from the header, else _c0, _c1, ...; every
// column a string unless inferSchema=true), JSON from every line (fields
// sorted by name). Without either the start is refused
// (UNABLE_TO_INFER_SCHEMA: Spark's "Schema must be specified when creating
// a streaming source DataFrame"). Partition columns are discovered from
// key=value directories as Spark's PartitioningUtils does, typed by
// Spark's inference (int, bigint, double, date, timestamp, string; the
// widest across files) unless schema= names them; every file must name
// the same partition columns (CONFLICTING_PARTITION_COLUMN_NAMES), unless
// recursiveFileLookup=true, which reads every file without partition
// columns. The source's schema is the data columns, then the partition
// columns.
//
// # Parsing text
//
// CSV (multiLine off): a line is a record; fields split by sep (","),
// quoted by quote ("\""), inside quotes escape ("\\") or a doubled quote
// stands for a quote; an unquoted field equal to nullValue ("") is null;
// header=true skips each file's first line. JSON lines: one object per
// line, fields matched by exact name, blank lines skipped. Values convert
// as Spark's parsers do (an INT column holds 32 bits; timestamps by
// timestampFormat, or Spark's default parsing, UTC when no zone). A
// malformed record (a CSV line with another field count, a value that
// does not convert, a line that is not one JSON object) follows mode:
// PERMISSIVE (default) keeps the row with nulls where values failed and
// its text in the corrupt-record column (columnNameOfCorruptRecord,
// default _corrupt_record) when the schema declares it as a STRING;
// DROPMALFORMED drops it; FAILFAST fails the batch with
// MALFORMED_RECORD_IN_PARSING naming the file and line. A file that cannot
// be read (missing, not Parquet, a column of another type) is
// FAILED_READ_FILE; the batch re-runs identically once it is fixed.
//
// Files are read whole (Parallelism at a time, in log order); Parquet
// through package pqcol, one batch per row group; text in batches of 4,096
// rows.
package files
