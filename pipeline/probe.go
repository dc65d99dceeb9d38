package pipeline

import (
	"context"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/storage"
)

// probeEndpoints asks each S3 endpoint the query uses (the checkpoint's,
// the table's, an s3:// archive source's) once whether it answers, before
// the start's checks and before anything is written: a dead endpoint is
// reported once, STORAGE_UNAVAILABLE naming it, not after every check's
// retries, nor after the start created the checkpoint. Retries wait on the
// query's clock.
func probeEndpoints(ctx context.Context, q engine.Query, opts engine.Options) error {
	var objs []*storage.Objects
	if m, ok := opts.FS.(*storage.Mux); ok {
		objs = m.Stores()
	}
	for _, ns := range q.Sources {
		if p, ok := ns.Source.(interface{ ProbeStore() *storage.Objects }); ok {
			if o := p.ProbeStore(); o != nil {
				objs = append(objs, o)
			}
		}
	}
	if len(objs) == 0 {
		return nil
	}
	return storage.Probe(ctx, opts.Clock, objs...)
}
