// Package flow builds and runs streaming queries in Go, without SQL: the
// counterpart of Spark's DataFrame API for ethstream's engine.
//
// A query reads one or more sources (stream.Source: any Go type with five
// methods, the counterpart of Spark's Python data source), runs a plan of
// steps in order — filters (Where), projections (Select), stateful
// aggregations (Aggregate, AggregateSessions), deduplications — and writes
// a sink, on a checkpoint:
//
//	sum, err := flow.New("hourly").
//		Read("ticks", src).
//		WithWatermark("ts", time.Minute).
//		Where(flow.Col("v").Gt(0)).
//		Aggregate(flow.Aggregation{Window: &agg.Window{Column: "ts", Size: 5 * time.Minute}, ...}).
//		WriteTo(sink).
//		Run(ctx, engine.Options{CheckpointDir: dir})
//
// Every stateful operator has an id as Spark numbers them (its
// statefulOperatorId, from the sink: the last operator is 0; a checkpoint
// written before keeps flow order, engine/opids.go), its own state in
// <checkpoint>/state/<id>, its own
// stateOperators[] entry in progress events and its own restart check
// against the shape the checkpoint recorded; a repartition
// (spark.sql.streaming.stateStore.partitions) repartitions each. Operators
// chain: one aggregation's rows, in append mode each window once when the
// watermark closes it, feed the next (WindowTime gives them an event time),
// as Spark 3.4+ allows.
//
// Build returns the engine.Query the plan makes; the CLI builds its queries
// through this package too.
package flow
