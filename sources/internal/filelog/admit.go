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
	var fresh []Object
	for _, o := range objs {
		if _, ok := seen[o.URI]; ok {
			continue
		}
		if snapshot != nil {
			if _, ok := snapshot[o.URI]; !ok {
				continue
			}
		}
		fresh = append(fresh, o)
	}
	if lim.MaxFileAge > 0 && latestSeen > 0 && !(lim.LatestFirst && lim.MaxFiles > 0) {
		cut := latestSeen - lim.MaxFileAge.Milliseconds()
		kept := fresh[:0:0]
		for _, o := range fresh {
			if o.ModTime.UnixMilli() >= cut {
				kept = append(kept, o)
			}
		}
		fresh = kept
	}
	if lim.LatestFirst {
		sortLatestFirst(fresh)
	}
	var bytes int64
	for _, o := range fresh {
		if lim.MaxFiles > 0 && len(admit) >= lim.MaxFiles {
			break
		}
		if lim.MaxBytes > 0 && len(admit) > 0 && bytes+o.Size > lim.MaxBytes {
			break
		}
		bytes += o.Size
		admit = append(admit, Entry{Path: o.URI, Timestamp: o.ModTime.UnixMilli(), BatchID: batchID, Size: o.Size})
	}
	return admit, int64(len(fresh) - len(admit))
}
