package demo

import (
	"os"
	"runtime"
	"testing"
)

func TestParseProcKB(t *testing.T) {
	status := []byte("Name:\tethstream\nVmHWM:\t  119204 kB\nVmRSS:\t   98304 kB\nRssAnon:\t   60000 kB\nRssFile:\t   38304 kB\n")
	rollup := []byte("55a0-7ffd ---p 00000000 00:00 0 [rollup]\nRss:               55488 kB\nFilePmdMapped:     38912 kB\nAnonymous:          3936 kB\n")
	for _, c := range []struct {
		text  []byte
		field string
		want  int64
	}{
		{status, "VmHWM", 119204 << 10},
		{status, "VmRSS", 98304 << 10},
		{status, "RssFile", 38304 << 10},
		{status, "Rss", -1}, // a prefix of RssAnon and RssFile, not a field of status
		{status, "VmSwap", -1},
		{rollup, "FilePmdMapped", 38912 << 10},
		{rollup, "Rss", 55488 << 10},
		{[]byte("VmHWM:\n"), "VmHWM", -1},
		{[]byte("VmHWM:\tlots kB\n"), "VmHWM", -1},
	} {
		if got := parseProcKB(c.text, c.field); got != c.want {
			t.Errorf("parseProcKB(%q) = %d, want %d", c.field, got, c.want)
		}
	}
}

// On Linux the process's own accounting has its text file-backed: the live
// figures' note reads real fields, not absent ones.
func TestProcMemLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the /proc figures are Linux's")
	}
	if _, err := os.Stat("/proc/self/smaps_rollup"); err != nil {
		t.Skip("no smaps_rollup on this kernel")
	}
	rss, file, huge := currentRSS(), fileRSS(), fileHugeRSS()
	if file <= 0 || file > rss || huge < 0 || huge > file {
		t.Fatalf("RSS %d, file-backed %d, of it in huge pages %d: want 0 < file <= RSS and 0 <= huge <= file", rss, file, huge)
	}
	if peak := peakRSS(); peak < rss {
		t.Fatalf("peak RSS %d below the current %d", peak, rss)
	}
}

func TestFileRSSNote(t *testing.T) {
	for _, c := range []struct {
		file, huge int64
		want       string
	}{
		{-1, -1, ""},
		{45e6, 0, " (file-backed at its end: 45 MB, the binary's text)"},
		{45e6, 39e6, " (file-backed at its end: 45 MB, 39 MB of it in huge pages: the binary's text)"},
	} {
		if got := fileRSSNote(c.file, c.huge); got != c.want {
			t.Errorf("fileRSSNote(%d, %d) = %q, want %q", c.file, c.huge, got, c.want)
		}
	}
}
