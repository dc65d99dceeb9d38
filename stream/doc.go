// Package stream is the leaf of ethstream: the streaming data model and the
// contracts between the engine and its plugins. It holds columnar batches
// (Batch, Column, Type), source offsets, the Source, Operator and Sink
// interfaces with the environments the engine hands them, the processing-time
// Clock, and the StreamingQueryProgress types. It imports nothing of ethstream
// and knows no domain: the Ethereum block schema lives in package ethblock.
//
// Every other package may import stream; stream imports only the standard
// library and pebble's vfs (the FS the engine hands its plugins).
package stream
