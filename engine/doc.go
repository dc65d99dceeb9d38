// Package engine is ethstream's micro-batch streaming engine: planning,
// triggers, restart and recovery, source evolution rules, progress events and
// listeners (DESIGN.md §3-§8).
//
// The contracts other packages implement are in this package: Source
// (sources/s3archive, sources/ethrpc), Operator (agg over state), Sink
// (sink/delta), all exchanging columnar Batches. The checkpoint files are in
// package checkpoint.
package engine
