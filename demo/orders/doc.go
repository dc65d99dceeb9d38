// Package orders is the seeds' other examples as a second demo
// (`ethstream demo --example orders`): deterministic synthetic orders
// written as Delta tables by ethstream's own Delta writer, then
//
//  1. the source-evolution article's "Get started": orders_us and
//     orders_eu read as named Delta sources and unioned in SQL
//     (FROM (SELECT * FROM orders_us UNION ALL SELECT * FROM orders_eu)), counted and summed per region into a
//     Delta table; then orders_eu removed (its name tombstoned), then
//     re-added under its old name: refused with
//     STREAMING_QUERY_EVOLUTION_ERROR.TOMBSTONE_SOURCE_NAME_REUSE, the
//     checkpoint unchanged;
//  2. the repartitioning article's customer-activity query over
//     order_events (30-minute windows per customer, count and sum(amount),
//     a 20-minute watermark), appended to a Delta table (Spark's DeltaSink
//     in append mode), on 4 state partitions, resized online to 8 (the
//     spark.sql.streaming.stateStore.partitions conf: a repartition control
//     batch) and back to 4 offline (checkpoint repartition);
//  3. the proof, from the query's own progress records: one query id over
//     the three runs, batch ids 0..n each once, each source offset starting
//     where the last ended, state keys equal before and after each
//     repartition; and the table equal to a brute-force recount and, with
//     --duckdb, to DuckDB's answer over order_events' files.
//
// # Results (ResultsDir, results/orders for the reference run)
//
// Every figure depends on the seed alone (no times, no random ids: a Delta
// source offset is shown as v<reservoirVersion>/i<index>, without the
// table id), so two runs write identical files:
//
//	batches.csv   run,batch_id,kind,state_partitions,start_offset,end_offset,
//	              input_rows,state_keys,dropped_late,output_rows (one line per
//	              progress event of the activity query)
//	union.csv     step,sources,outcome,code,batches,end_offsets,table
//	skew.csv      customer,events,windows,amount (the ten busiest customers)
//	summary.txt   one PASS/FAIL line per check
//
// Amounts are DOUBLE: the articles' DECIMAL(10,2) is not yet written by the
// Delta writer.
package orders
