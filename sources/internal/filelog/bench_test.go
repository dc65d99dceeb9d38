package filelog

import (
	"fmt"
	"testing"
	"time"
)

// seedListing is the seed archive's shape: 4,080 daily files.
func seedListing() []Object {
	objs := make([]Object, 4080)
	t0 := time.Date(2015, 7, 30, 0, 0, 0, 0, time.UTC)
	for i := range objs {
		objs[i] = Object{URI: fmt.Sprintf("s3://aws-public-blockchain/v1.0/eth/blocks/date=%s/part-00000-c000.snappy.parquet", t0.AddDate(0, 0, i).Format("2006-01-02")),
			Size: 50_000, ModTime: t0}
	}
	return objs
}

// BenchmarkAdmitBackfill admits the seed listing 365 files per trigger,
// as the archive backfill does (12 triggers, the listing re-used).
func BenchmarkAdmitBackfill(b *testing.B) {
	objs := seedListing()
	b.ReportAllocs()
	for range b.N {
		seen := map[string]struct{}{}
		for id := int64(0); ; id++ {
			admit, _ := Admit(objs, seen, nil, Limits{MaxFiles: 365}, id, 0)
			if len(admit) == 0 {
				break
			}
			for _, e := range admit {
				seen[e.Path] = struct{}{}
			}
		}
	}
}
