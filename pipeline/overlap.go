package pipeline

import (
	"slices"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/stream"
)

// checkOverlap refuses a query that reads an overlapping ethrpc source
// (overlap=K: K blocks before start_block, which the archive holds too,
// read again) without a deduplication by block: --drop-duplicates or
// --drop-duplicates-within-watermark on columns holding hash or number and
// not source (by which the two copies of a block differ). Without one,
// every block of the overlap would be counted twice, silently.
func checkOverlap(cfg Config, sources []engine.NamedSource) error {
	for _, ns := range sources {
		src, ok := ns.Source.(*ethrpc.Source)
		if !ok || src.Overlap() == 0 {
			continue
		}
		if byBlock(dedupColumns(cfg.DropDuplicates)) || byBlock(dedupColumns(cfg.DropDuplicatesWithinWatermark)) {
			continue
		}
		return errcode.New(errcode.InvalidArgument, "",
			"add --drop-duplicates-within-watermark 'hash' (or --drop-duplicates 'hash'), or drop the overlap option",
			"--source %s reads %d blocks before its start_block again (overlap=%d): without a deduplication by block they would be counted twice",
			ns.Name, src.Overlap(), src.Overlap())
	}
	return nil
}

// byBlock reports whether deduplication columns identify a block whatever
// source read it.
func byBlock(cols []string) bool {
	return (slices.Contains(cols, ethblock.ColHash) || slices.Contains(cols, ethblock.ColNumber)) &&
		!slices.Contains(cols, stream.ColSource)
}
