// Package demo is ethstream's reference application: it runs the seeds' lifecycle
// (backfill, add a live source, retire the archive, refused reuse, shrink the
// state) on one checkpoint and one Delta table, then proves each claim from the
// query's own records and the table (docs/contracts.md, Demo checks), and draws the charts.
//
// # Files it writes to the results directory
//
//	batches.csv, sources.csv   progress flattened by engine.FlattenProgress (docs/contracts.md, Progress records)
//	verification.csv           header "check,expected,actual,pass"; one row per check,
//	                           numbered by the docs/contracts.md, Demo checks claim it proves ("5. ...");
//	                           pass is true or false, or "figure" for a reported number
//	summary.txt                the phase table and checks as printed (informational)
//	state.svg, latency.svg, input.svg   charts drawn from the two CSVs only
//
// Every file is written to a temporary name and renamed, so a failed run never
// leaves a half-written result next to a good one.
//
// `ethstream bench --out FILE` writes BenchResult as indented JSON: one object
// whose keys are the json tags of BenchResult (durations in milliseconds, sizes
// in bytes). Version 1; keys are only ever added.
package demo
