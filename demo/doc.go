// Package demo is ethstream's reference application: it runs the seeds' lifecycle
// (backfill, add a live source, retire the archive, refused reuse, shrink the
// state, then follow the head through chain reorganisations) on one checkpoint
// and one Delta table (the reorg phase on its own), then proves each claim from the
// query's own records and the table (docs/contracts.md, Demo checks), and draws the charts.
//
// # Files it writes to the results directory
//
//	batches.csv, sources.csv   progress flattened by engine.FlattenProgress (docs/contracts.md, Progress records)
//	verification.csv           header "check,expected,actual,result"; one row per check,
//	                           numbered by the docs/contracts.md, Demo checks claim it proves ("5. ...");
//	                           result is PASS or FAIL, or "figure" for a reported number
//	summary.txt                the phase table and checks as printed (informational), with
//	                           the same result markers; the README's results sections are
//	                           rendered from it and verification.csv (RenderREADME)
//	state.svg, memory.svg, latency.svg, input.svg   charts drawn from the two CSVs only
//
//	reorgs/reorgs.csv          the live_reorgs phase, one row per data batch: header
//	                           "start,batch_id,end_block,fork,blocks_retracted,blocks_inserted,reorg_depth,
//	                           old_tip,new_tip,table_rows,recount_rows,rows_differing,rows_deleted";
//	                           start is the query start (1-3), fork the common ancestor of a
//	                           retracting batch (empty otherwise), table_rows and recount_rows
//	                           the eth_live rows of the table at the batch's version and of a
//	                           recount of the chain ending at the batch's end, rows_differing
//	                           the keys where they differ (0 when exact), rows_deleted the
//	                           MERGE's numTargetRowsDeleted
//	reorgs/batches.csv, reorgs/sources.csv   that phase's progress, flattened as above
//
// # The live_reorgs phase
//
// After the lifecycle's checks, a query of its own (checkpoint and table
// under <workdir>/reorgs) reads the node's head with
// confirmations=0&reorg=retract&reorgDepth=16 from 40 blocks below it. After
// every data batch the demo mines 1-3 blocks and, four times in ten,
// reorganises the last 1-8 blocks (sometimes twice, so both fall into one
// batch); between the first and second start it reorganises once more,
// below the last block the query committed. A third start (available-now)
// catches up with the quiet chain. Checks "10." prove from the progress
// events, the node and the Delta table at each batch's version that the
// table equals a recount of the canonical chain after every batch, that
// the orphaned blocks (walked by hash from each retracted tip down to its
// ancestor) are as many as the blocks retracted, none is on the final
// chain, and counting them would have changed the table.
//
// Every file is published by package durable (a temporary name, fsync, rename,
// directory fsync), so a failed run never leaves a half-written result next
// to a good one; the demo deletes temp files an interrupted run left in the
// results directory before it writes the report.
//
// `ethstream bench --out FILE` writes BenchResult as indented JSON: one object
// whose keys are the json tags of BenchResult (durations in milliseconds, sizes
// in bytes); backfillPhases is an object with the json tags of BenchPhases,
// the backfill's time per phase summed from its progress events. Version 1;
// keys are only ever added.
package demo
