package chain

import (
	"context"
	"testing"
)

func BenchmarkGenerate20Days(b *testing.B) {
	p := RangePreset(d(2019, 6, 1), 20)
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		m, err := GenerateArchive(context.Background(), GenOptions{Out: dir, Preset: p, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(m.Rows)/b.Elapsed().Seconds()*float64(i+1), "rows/s")
		b.ReportMetric(float64(m.Bytes)/float64(m.Rows), "B/row")
	}
}
