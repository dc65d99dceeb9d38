package checkpoint

import (
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

func TestCheckStateProvider(t *testing.T) {
	snap := func(conf map[string]string) *Snapshot {
		return &Snapshot{Path: "/ck", LatestID: 3, Latest: &OffsetEntry{Version: OffsetsV2, Metadata: OffsetMetadata{Conf: conf}}}
	}
	if err := (&Snapshot{Path: "/ck", LatestID: -1}).CheckStateProvider(); err != nil {
		t.Fatalf("new checkpoint: %v", err)
	}
	if err := snap(map[string]string{ConfProviderClass: ProviderPebble}).CheckStateProvider(); err != nil {
		t.Fatalf("ours: %v", err)
	}
	for _, c := range []struct {
		conf map[string]string
		want string
	}{
		{map[string]string{ConfProviderClass: ProviderRocksDB}, "RocksDBStateStoreProvider (recorded as"},
		{map[string]string{ConfProviderClass: ProviderHDFS}, "HDFSBackedStateStoreProvider (recorded as"},
		{map[string]string{ConfShufflePartitions: "5"}, "HDFSBackedStateStoreProvider (Spark's default: offsets entry 3 does not record"},
		{nil, "HDFSBackedStateStoreProvider (Spark's default"},
	} {
		err := snap(c.conf).CheckStateProvider()
		if !errcode.Is(err, errcode.StateProviderUnsupported) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "/ck") {
			t.Errorf("conf %v: %v", c.conf, err)
		}
	}
	for key, want := range map[string]string{ConfShufflePartitions: "200", ConfSourceEvolution: "false", ConfProviderClass: ProviderHDFS} {
		if v, recorded := ConfValue(map[string]string{}, key); v != want || recorded {
			t.Errorf("ConfValue(%s) = %q %v, want %q", key, v, recorded, want)
		}
		if v, recorded := ConfValue(map[string]string{key: "x"}, key); v != "x" || !recorded {
			t.Errorf("recorded %s = %q %v", key, v, recorded)
		}
	}
}
