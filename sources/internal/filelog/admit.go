package filelog

import "time"

// Object is one listed data file.
type Object struct {
	URI     string // canonical URI, as stored (URL-encoded) in the log
	Size    int64
	ModTime time.Time
}

// Limits are a trigger's read limits (Spark's FileStreamOptions). The zero
// value admits every new file.
type Limits struct {
	// MaxFiles caps the files admitted by one log id; 0: no cap.
	MaxFiles int
	// MaxBytes caps their total size (a soft cap: the first file is always
	// admitted); 0: no cap.
	MaxBytes int64
	// LatestFirst admits the newest files first (Spark's latestFirst:
	// by modification time, newest first; ties in the listing order).
	LatestFirst bool
	// MaxFileAge drops a new file whose modification time is older than
	// the newest admitted file's minus MaxFileAge (Spark's maxFileAge,
	// measured as its SeenFilesMap measures it: from the newest file seen,
	// not the clock; the first admission takes every file). 0: no age
	// limit. Spark ignores it when LatestFirst and MaxFiles are both set;
	// so does Admit.
	MaxFileAge time.Duration
}

// Admit picks the files of the next log id from objs (in admission order:
// the caller sorts them), skipping those seen already and, when snapshot is
// non-nil, those not in it; latestSeen is the newest modification time
// (ms) of the files admitted before (0: none). It returns the admitted files and how many new
// files remain unadmitted. It is pure: the same inputs give the same answer,
// so a re-run of a crashed admission over the same listing is identical.
func Admit(objs []Object, seen, snapshot map[string]struct{}, lim Limits, batchID, latestSeen int64) (admit []Entry, pending int64) {
	ageOn := lim.MaxFileAge > 0 && latestSeen > 0 && !(lim.LatestFirst && lim.MaxFiles > 0)
	cut := latestSeen - lim.MaxFileAge.Milliseconds()
	eligible := func(o *Object) bool {
		if _, ok := seen[o.URI]; ok {
			return false
		}
		if snapshot != nil {
			if _, ok := snapshot[o.URI]; !ok {
				return false
			}
		}
		return !ageOn || o.ModTime.UnixMilli() >= cut
	}
	// In listing order (the archive's backfill path) one pass admits and
	// counts, allocating only the entries; latestFirst sorts a copy.
	order := objs
	if lim.LatestFirst {
		order = nil
		for i := range objs {
			if eligible(&objs[i]) {
				order = append(order, objs[i])
			}
		}
		sortLatestFirst(order)
	}
	var bytes int64
	full := false
	for i := range order {
		o := &order[i]
		if !lim.LatestFirst && !eligible(o) {
			continue
		}
		if !full && lim.MaxFiles > 0 && len(admit) >= lim.MaxFiles {
			full = true
		}
		if !full && lim.MaxBytes > 0 && len(admit) > 0 && bytes+o.Size > lim.MaxBytes {
			full = true
		}
		if full {
			pending++
			continue
		}
		bytes += o.Size
		admit = append(admit, Entry{Path: o.URI, Timestamp: o.ModTime.UnixMilli(), BatchID: batchID, Size: o.Size})
	}
	return admit, pending
}
