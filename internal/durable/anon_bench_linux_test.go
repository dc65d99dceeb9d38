//go:build linux

package durable

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/cputime"
)

// BenchmarkPublishSmall publishes a 300-byte file on the local disk, a
// live batch's checkpoint entry, through an anonymous file from the pool
// (anon) and through a created temp file (created), and reports the
// process's CPU per publish: the pool's background opens count too, which
// the wall time per op does not show (the question of issue 43's live
// batch: does the pool save CPU, or move it?). Alternate the two on a busy
// machine: go test -run '^$' -bench PublishSmall -benchtime 2000x -count 6
// ./internal/durable/
func BenchmarkPublishSmall(b *testing.B) {
	data := make([]byte, 300)
	for _, mode := range []string{"anon", "created"} {
		b.Run(mode, func(b *testing.B) {
			on := anonEnabled
			defer func() { anonEnabled = on }()
			anonEnabled = mode == "anon" && on
			dir := b.TempDir()
			p := For(vfs.Default)
			if _, err := Bytes(p, dir, "prime", Options{}, data); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			c0 := cputime.Self()
			for i := range b.N {
				if _, err := Bytes(p, dir, fmt.Sprint(i), Options{}, data); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cputime.Self() - c0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
