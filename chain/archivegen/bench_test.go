package archivegen

import (
	"context"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain"
)

// BenchmarkGenerate20Days measures writing 20 days of 2019 (PoW, ~6,000
// blocks a day). Run: go test -run '^$' -bench Generate20Days ./chain/archivegen
func BenchmarkGenerate20Days(b *testing.B) {
	p := chain.RangePreset(time.Date(2019, 6, 1, 0, 0, 0, 0, time.UTC), 20)
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		m, err := Generate(context.Background(), Options{Out: dir, Preset: p, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(m.Rows)/b.Elapsed().Seconds()*float64(i+1), "rows/s")
		b.ReportMetric(float64(m.Bytes)/float64(m.Rows), "B/row")
	}
}
