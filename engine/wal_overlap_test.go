package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// readSignalSource tells its reads to the offsets writer's fsync.
type readSignalSource struct {
	memSource
	reads chan struct{}
}

func (s *readSignalSource) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	s.reads <- struct{}{}
	return s.memSource.ReadBatch(ctx, start, end, emit)
}

// durableOffsetsSink checks, as it writes batch N, that offsets/N would
// survive a crash at that instant.
type durableOffsetsSink struct {
	stream.Sink
	fs       *vfs.MemFS
	mu       sync.Mutex
	problems []string
}

func (s *durableOffsetsSink) AddBatch(ctx context.Context, id int64, out *stream.Batch) (stream.SinkProgress, error) {
	crashed := s.fs.CrashClone(vfs.CrashCloneCfg{})
	if _, err := crashed.Stat(checkpoint.Dir{FS: crashed, Path: ckptDir}.OffsetsPath(id)); err != nil {
		s.mu.Lock()
		s.problems = append(s.problems, fmt.Sprintf("sink wrote batch %d before offsets/%d was durable: %v", id, id, err))
		s.mu.Unlock()
	}
	return s.Sink.AddBatch(ctx, id, out)
}

// TestOffsetsWrittenAlongsideReads: a new batch's offsets/N is written
// while its sources are read (walSteps), yet is durable before the sink
// writes anything of batch N. The offsets file's fsync waits until the
// batch's read has begun: a driver that wrote offsets/N before reading
// would make it wait in vain (then it gives up, once, and the test fails);
// a driver that did not await offsets/N before the sink fails the sink's
// crash check.
func TestOffsetsWrittenAlongsideReads(t *testing.T) {
	s := newScenario()
	s.sources["a"] = &srcWorld{start: 1, available: 30, max: 10}
	src := &readSignalSource{memSource: memSource{w: s.sources["a"], name: "a"}, reads: make(chan struct{}, 16)}
	var mu sync.Mutex
	var overlapMissing bool
	gate := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind != errorfs.OpFileSync || !strings.Contains(op.Path, "/"+checkpoint.OffsetsDir+"/.") {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if overlapMissing {
			return nil
		}
		select {
		case <-src.reads:
		case <-time.After(10 * time.Second): // a serial driver: never, give up once
			overlapMissing = true
		}
		return nil
	})
	sink := &durableOffsetsSink{Sink: streamtest.Plain(s.table), fs: s.fs}
	q := Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource}, Operator: &countOp{}, Sink: sink,
		Trigger: Trigger{Kind: AvailableNow}, Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"},
		Sources: []NamedSource{{"a", src}}}
	sum, err := Run(context.Background(), q, Options{CheckpointDir: ckptDir, FS: errorfs.Wrap(s.fs, gate), Clock: s.clock})
	if err != nil || sum.LastBatchID != 2 {
		t.Fatalf("run: %+v %v", sum, err)
	}
	if overlapMissing {
		t.Error("offsets/N was fsynced with no read of its batch alongside")
	}
	for _, p := range sink.problems {
		t.Error(p)
	}
	if got := s.verifyTable(); !strings.HasPrefix(got, "ok: 30 blocks") {
		t.Fatal(got)
	}
}
