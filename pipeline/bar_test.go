package pipeline

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/stream"
)

func TestBarStatusAndLogLines(t *testing.T) {
	now := time.Date(2026, 9, 30, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var out bytes.Buffer
	b := NewBar(&out, 100, "backfill", clock)
	name := "s3_backfill"
	ev := func(id, rows int64, read, admitted, pending string) *stream.Progress {
		return &stream.Progress{BatchID: id, NumInputRows: rows, Sources: []stream.SourceProgress{{Name: &name,
			Metrics: map[string]string{"filesRead": read, "filesAdmitted": admitted, "pendingFiles": pending}}}}
	}
	now = now.Add(2 * time.Second)
	b.OnProgress(ev(0, 70000, "10", "10", "50"))
	want := "backfill  batch 0  files 10/60  16%  blocks 70,000  35,000 blocks/s  ETA 10s"
	if got := b.status(); got != want {
		t.Fatalf("status = %q, want %q", got, want)
	}
	b.Write([]byte("time=x level=WARN msg=slow\n"))
	if !strings.HasSuffix(out.String(), clearLine+"time=x level=WARN msg=slow\n"+clearLine+want) {
		t.Fatalf("a log line is not printed above the status line: %q", out.String())
	}
	now = now.Add(10 * time.Second)
	b.OnProgress(ev(1, 350000, "60", "60", "0"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "files 60/60  100%  blocks 420,000  35,000 blocks/s  done in 12s\n") {
		t.Fatalf("final line: %q", out.String())
	}

	// A live source: blocks behind head instead of files; a narrow terminal
	// gets a truncated line (a wrapped one could not be redrawn in place).
	out.Reset()
	live := "eth_live"
	b = NewBar(&out, 40, "live", clock)
	b.OnProgress(&stream.Progress{BatchID: 13, NumInputRows: 20, Sources: []stream.SourceProgress{{Name: &live,
		EndOffset: stream.Offset(`{"block":120,"hash":"0x1"}`), Metrics: map[string]string{"head": "125"}}}})
	if got := b.status(); !strings.Contains(got, "eth_live 5 behind head") {
		t.Fatalf("status = %q", got)
	}
	if line := out.String()[len(clearLine):]; len([]rune(line)) != 39 {
		t.Fatalf("drawn line %q is not cut to the width", line)
	}
	if err := (&Bar{}).Close(); err != nil || NewBar(&out, 80, "x", clock).Close() != nil {
		t.Fatal("closing a bar that never drew failed")
	}
}
