package pipeline

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// Bar is the status line of a run on a terminal: one line, redrawn in place
// after every batch, with the files read of the total the sources know of
// (an availableNow backfill admits its whole listing at the first trigger),
// the blocks read, the rate in blocks per second since the start and, when a
// total is known, the ETA. Log lines written through Bar (it is an
// io.Writer for a slog handler) are printed above the line: the line is
// cleared, the log line written, the status line drawn again.
//
// Close draws the final status as a permanent line and ends it, so whatever
// is printed next (the run summary) starts on a line of its own.
type Bar struct {
	mu     sync.Mutex
	w      io.Writer
	width  int
	now    func() time.Time
	start  time.Time
	drawn  bool
	closed bool

	label             string
	batch             int64
	rows              int64
	filesRead, totalF int64
	haveFiles         bool
	lag               map[string]int64 // blocks behind head per live source
	lagOrder          []string
}

// clearLine returns the cursor to column 0 and erases the line (ECMA-48 EL 2).
const clearLine = "\r\x1b[2K"

// NewBar draws on w, a terminal width columns wide (0: 80), from the first
// log line or progress event on. label names the run ("backfill", "live").
func NewBar(w io.Writer, width int, label string, now func() time.Time) *Bar {
	if width <= 0 {
		width = 80
	}
	return &Bar{w: w, width: width, now: now, start: now(), label: label, batch: -1, lag: map[string]int64{}}
}

// Write prints p (whole log lines) above the status line.
func (b *Bar) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.w.Write(p)
	}
	if b.drawn {
		if _, err := io.WriteString(b.w, clearLine); err != nil {
			return 0, err
		}
		b.drawn = false
	}
	n, err := b.w.Write(p)
	if err != nil {
		return n, err
	}
	if len(p) > 0 && p[len(p)-1] != '\n' {
		io.WriteString(b.w, "\n")
	}
	b.draw()
	return n, nil
}

// OnProgress takes the batch's counts and redraws the line.
func (b *Bar) OnProgress(p *stream.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batch = p.BatchID
	b.rows += p.NumInputRows
	var read, total int64
	files := false
	for i, s := range p.Sources {
		m := s.Metrics
		if v, ok := m["filesRead"]; ok {
			files = true
			read += atoi(v)
			total += atoi(m["filesAdmitted"]) + atoi(m["pendingFiles"])
		}
		if lag, ok := SourceLag(s); ok {
			name := SourceLabel(i, s)
			if _, seen := b.lag[name]; !seen {
				b.lagOrder = append(b.lagOrder, name)
			}
			b.lag[name] = lag
		}
	}
	if files {
		b.haveFiles, b.filesRead, b.totalF = true, read, total
	}
	if !b.closed {
		b.draw()
	}
}

// Close ends the status line; the last status stays on screen. A bar that
// never drew leaves nothing.
func (b *Bar) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || !b.drawn {
		b.closed = true
		return nil
	}
	b.draw()
	b.closed = true
	_, err := io.WriteString(b.w, "\n")
	return err
}

// draw replaces the status line. Callers hold mu.
func (b *Bar) draw() {
	line := b.status()
	if r := []rune(line); len(r) > b.width-1 {
		line = string(r[:b.width-1]) // a wrapped line could not be redrawn in place
	}
	io.WriteString(b.w, clearLine+line)
	b.drawn = true
}

// status renders the line, e.g.
//
//	backfill  batch 7  files 40/60  67%  blocks 286,003  203,115 blocks/s  ETA 1s
func (b *Bar) status() string {
	elapsed := b.now().Sub(b.start)
	var s strings.Builder
	s.WriteString(b.label)
	if b.batch >= 0 {
		fmt.Fprintf(&s, "  batch %d", b.batch)
	}
	if b.haveFiles {
		fmt.Fprintf(&s, "  files %d/%d", b.filesRead, b.totalF)
		if b.totalF > 0 {
			fmt.Fprintf(&s, "  %d%%", b.filesRead*100/b.totalF)
		}
	}
	fmt.Fprintf(&s, "  blocks %s", group(b.rows))
	if secs := elapsed.Seconds(); secs > 0 && b.rows > 0 {
		fmt.Fprintf(&s, "  %s blocks/s", group(int64(float64(b.rows)/secs)))
	}
	for _, n := range b.lagOrder {
		fmt.Fprintf(&s, "  %s %d behind head", n, b.lag[n])
	}
	if b.haveFiles && b.filesRead > 0 && b.totalF > 0 {
		if left := b.totalF - b.filesRead; left > 0 {
			eta := time.Duration(float64(elapsed) * float64(left) / float64(b.filesRead))
			fmt.Fprintf(&s, "  ETA %s", roundDuration(eta))
		} else {
			fmt.Fprintf(&s, "  done in %s", roundDuration(elapsed))
		}
	}
	return s.String()
}

// group formats n with thousands separators: 1234567 -> 1,234,567.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
