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

// BenchmarkNodeMine1000 measures mining 1,000 late-2026 blocks with their
// transactions (target: well under 2 s).
func BenchmarkNodeMine1000(b *testing.B) {
	dir := b.TempDir()
	m, err := GenerateArchive(context.Background(), GenOptions{Out: dir, Preset: LastDaysPreset(1), Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, err := StartNode(context.Background(), NodeOptions{Manifest: m, Seed: 1, Manual: true, Addr: "127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		n.Mine(1000)
		n.Close()
	}
}
