package checkpoint

import (
	"fmt"
	"strconv"

	"github.com/ethstream/ethstream/errcode"
)

// Conf keys (docs/contracts.md, Configuration). They follow Spark's names on purpose.
const (
	ConfShufflePartitions  = "spark.sql.shuffle.partitions"
	ConfSourceEvolution    = "spark.sql.streaming.queryEvolution.enableSourceEvolution"
	ConfOffsetLogVersion   = "spark.sql.streaming.offsetLog.formatVersion"
	ConfStatePartitions    = "spark.sql.streaming.stateStore.partitions"
	ConfProviderClass      = "spark.sql.streaming.stateStore.providerClass"
	ConfMinBatchesToRetain = "spark.sql.streaming.minBatchesToRetain"
	ConfNoDataBatches      = "spark.sql.streaming.noDataMicroBatches.enabled"
	// ConfMultipleWatermarkPolicy combines the watermarks of a query with
	// several (a join's sides): "min" (Spark's default) or "max". Recorded
	// in the offsets entries of such a query and pinned from them, as
	// Spark's OffsetSeqMetadata does; an entry without it means "min".
	ConfMultipleWatermarkPolicy = "spark.sql.streaming.multipleWatermarkPolicy"

	// ProviderPebble is ethstream's state store provider, recorded in conf.
	ProviderPebble = "pebble"
	// ProviderHDFS is Spark's default state store provider: the one that
	// wrote the state of every Spark checkpoint that does not record
	// ConfProviderClass.
	ProviderHDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
	// ProviderRocksDB is Spark's RocksDB state store provider.
	ProviderRocksDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

	// DefaultMinBatchesToRetain is Spark's default retention.
	DefaultMinBatchesToRetain = 100
	// defaultShufflePartitions is Spark's default spark.sql.shuffle.partitions.
	defaultShufflePartitions = 200
)

// PinnedConfs are the conf keys recorded in every offsets entry and restored
// from the checkpoint on restart, in the order they are documented.
var PinnedConfs = []string{ConfShufflePartitions, ConfSourceEvolution, ConfProviderClass}

// confDefaults is what a pinned key that an offsets entry does not record
// means (doc.go, "Missing conf keys"): Spark's value for checkpoints written
// before the key was recorded.
var confDefaults = map[string]string{
	ConfShufflePartitions: strconv.Itoa(defaultShufflePartitions),
	ConfSourceEvolution:   "false",
	ConfProviderClass:     ProviderHDFS,
}

// ConfValue returns the value of pinned key in conf, or, when conf does not
// record it, its default for old checkpoints; recorded says which.
func ConfValue(conf map[string]string, key string) (value string, recorded bool) {
	if v, ok := conf[key]; ok {
		return v, true
	}
	return confDefaults[key], false
}

// StateProvider returns the state store provider that wrote the state of the
// checkpoint whose latest offsets entry is e (Spark's default when e does not
// record one; ethstream always does).
func (e *OffsetEntry) StateProvider() (class string, recorded bool) {
	return ConfValue(e.Metadata.Conf, ConfProviderClass)
}

// CheckStateProvider refuses a checkpoint whose state another provider wrote
// (STATE_PROVIDER_UNSUPPORTED): ethstream cannot read that state, and a
// start with none would silently lose it. Reading the logs (inspect, plan)
// stays possible; only a start or a repartition must be refused, before
// anything is written. A snapshot without offsets entries passes.
func (s *Snapshot) CheckStateProvider() error {
	if s.Latest == nil {
		return nil
	}
	class, recorded := s.Latest.StateProvider()
	if class == ProviderPebble {
		return nil
	}
	where := fmt.Sprintf("recorded as %s in offsets entry %d", ConfProviderClass, s.LatestID)
	if !recorded {
		where = fmt.Sprintf("Spark's default: offsets entry %d does not record %s", s.LatestID, ConfProviderClass)
	}
	return errcode.New(errcode.StateProviderUnsupported, s.Path,
		"resume this checkpoint with the engine that wrote it (Apache Spark), or start ethstream on a new checkpoint directory",
		"the state of this checkpoint was written by state store provider %s (%s); ethstream reads only state written by its own provider %q",
		class, where, ProviderPebble)
}
