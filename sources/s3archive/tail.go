package s3archive

import "sync/atomic"

// tailModel sizes the speculative tail read of an S3 object from the files
// read before it. The tail is the one read made before the footer is known,
// so it is a guess, and footerPrefetch's fixed 128 KiB was a poor one for
// the seed archive's daily blocks files: where the last row group's miner
// chunk lies within coalesceGap of the ~7.5 KiB footer (33-90 KiB from the
// end) it read up to ~100 KiB before that chunk, and where it lies ~290 KiB
// before the footer (the files since April 2023) it read 120 KiB for the
// footer alone. The files of one archive share a layout (the same columns
// and row groups, sizes moving slowly from day to day), so the tail a file
// needed is a close guess for the next: BenchmarkBackfillReads/s3 fetches
// 659 MB in 14,810 requests instead of 868 MB in 14,886.
//
// A guess too short costs a request and no latency when it misses a
// column chunk (the chunk is fetched with the others, at once), and a
// request in series when it misses the footer itself (openFooter), which
// the margin makes rare: a footer's size moves with the row groups, not
// with the day. It is safe for concurrent use; files decoded at once race
// to record theirs, and any of them is a fair guess.
type tailModel struct {
	last atomic.Int64 // the tail the last file needed; 0: none yet
}

// Bounds of a learned tail: at most a read buffer's largest kept size
// (maxReadBufCap), at least what a daily file's footer needs.
const (
	minTail = 16 << 10
	maxTail = maxReadBufCap
)

// next is the tail to read of an object: the last file's need plus a
// margin for the next day's slightly larger file, or def before any file
// was read.
func (t *tailModel) next(def int64) int64 {
	need := t.last.Load()
	if need == 0 {
		return def
	}
	return min(max(need+need/16+4<<10, minTail), maxTail)
}

// observe records the tail a file needed: its footer, and every range
// fetched for it that lies within the shape's gap of the footer, which a
// tail reaching back to its start would have covered in the same read.
func (t *tailModel) observe(need int64) { t.last.Store(need) }

// tailNeed is the tail a file of size bytes with its footer at footer
// needed: from the first of its coalesced ranges rs (sorted) whose hole to
// the footer is at most gap, else from the footer.
func tailNeed(rs []byteRange, size, footer, gap int64) int64 {
	from := footer
	for i := len(rs) - 1; i >= 0 && rs[i].end+gap >= from; i-- {
		from = min(from, rs[i].off)
	}
	return size - from
}
