package delta

import (
	"strconv"

	"github.com/ethstream/ethstream/stream"
)

var _ stream.SinkAdvisor = (*MergeSink)(nil)

// Remedy words the remedy of a start's refusal about the sink's table in
// the table's terms (stream.SinkAdvisor): its --table and --table-shared
// options, its _delta_log.
func (m *MergeSink) Remedy(r stream.SinkRefusal) string {
	switch r.Problem {
	case stream.SinkOutputInUse:
		return "point --table at a new directory, or pass --table-shared if both queries are meant to MERGE into this table"
	case stream.SinkOutputBehind:
		return "restore the table from a backup that holds batch " + strconv.FormatInt(r.Batch, 10) +
			" (or the missing _delta_log commit), or re-run the query from a copy of the checkpoint taken together with this table"
	case stream.SinkOutputAhead:
		return "restore the checkpoint taken together with this table, or point --table at the table this checkpoint wrote"
	case stream.SinkOutputOther:
		id := ""
		if r.ID != "" {
			id = "id " + r.ID + ", "
		}
		return "point --table at the table this checkpoint wrote (" + id + "last at " + r.Location + "), or start a new checkpoint for this table"
	case stream.SinkOutputMoved:
		return "start the changed query on a new checkpoint (and a new table), or point --table back at " + r.Location + " (or at a copy of that table)"
	}
	return ""
}
