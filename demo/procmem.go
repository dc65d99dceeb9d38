package demo

import (
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
)

// The bench's memory figures come from the kernel's accounting of this
// process (Linux; elsewhere they read -1): VmHWM, the peak resident set since
// the last reset; VmRSS, the resident set now; RssFile, the file-backed part
// of it (the binary's text, mapped files); and FilePmdMapped, the file-backed
// part mapped in 2 MiB pages. The last one is why a peak RSS can move by 10-20
// MB between two identical binaries: where the kernel collapses a binary's
// text into huge pages in the page cache (khugepaged with
// CONFIG_READ_ONLY_THP_FOR_FS), a process maps the binary in 2 MiB pages and
// every page it touches counts whole, so a binary that has run for a while
// has a larger resident set than a fresh copy of itself.

// peakRSS returns VmHWM of this process; resetPeakRSS restarts it.
func peakRSS() int64 { return procKB("/proc/self/status", "VmHWM") }

// currentRSS is the process's resident set (VmRSS), -1 if unknown.
func currentRSS() int64 { return procKB("/proc/self/status", "VmRSS") }

// fileRSS is the file-backed part of the resident set (RssFile).
func fileRSS() int64 { return procKB("/proc/self/status", "RssFile") }

// fileHugeRSS is the file-backed memory mapped in huge pages (FilePmdMapped).
func fileHugeRSS() int64 { return procKB("/proc/self/smaps_rollup", "FilePmdMapped") }

// resetPeakRSS returns freed heap to the OS first, so that a phase's peak is
// not the previous phase's leftovers (the live phases follow the backfill in
// this same process).
func resetPeakRSS() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// procKB reads the "Field: N kB" line of a /proc file in bytes, -1 if the
// file or the field is missing.
func procKB(path, field string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	return parseProcKB(b, field)
}

// parseProcKB finds field's line ("VmHWM:\t  1234 kB") in a /proc status or
// smaps_rollup text and returns its value in bytes, -1 if absent.
func parseProcKB(b []byte, field string) int64 {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte(field+":"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return -1
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return -1
		}
		return kb * 1024
	}
	return -1
}

// fileRSSNote says how much of a peak RSS was file-backed, and how much of
// that in huge pages, when the kernel told (both read -1 elsewhere).
func fileRSSNote(file, huge int64) string {
	if file < 0 {
		return ""
	}
	if huge <= 0 {
		return fmt.Sprintf(" (file-backed at its end: %.0f MB, the binary's text)", float64(file)/1e6)
	}
	return fmt.Sprintf(" (file-backed at its end: %.0f MB, %.0f MB of it in huge pages: the binary's text)", float64(file)/1e6, float64(huge)/1e6)
}
