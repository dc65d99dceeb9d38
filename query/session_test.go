package query

import (
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/session"
)

// TestCompileSessionWindow: GROUP BY session_window(...) compiles to one
// session window step (package session's operator), its fields selected
// under their names, a dynamic gap derived as a string column.
func TestCompileSessionWindow(t *testing.T) {
	o := testOptions()
	o.OutputMode = "append"
	for _, tc := range []struct {
		q, gap, start, end, columns string
	}{
		{q: "SELECT session_window, miner, count(*) AS blocks FROM blocks GROUP BY session_window(block_ts, '10 minutes'), miner",
			gap: "10 minutes", start: session.ColStart, end: session.ColEnd, columns: "block_ts,miner"},
		{q: "SELECT session_window.start AS s, session_window.end AS e, miner, sum(gas_used) AS gas FROM blocks GROUP BY session_window(block_ts, INTERVAL 10 MINUTES), miner",
			gap: "10 minutes", start: "s", end: "e", columns: "block_ts,miner,gas_used"},
		{q: "SELECT session_window(block_ts, '1 hour'), miner, count(*) AS n FROM blocks GROUP BY session_window, miner",
			gap: "1 hour", start: session.ColStart, end: session.ColEnd, columns: "block_ts,miner"},
		{q: "SELECT session_window(block_ts, CASE WHEN miner = '0x1' THEN '5 minutes' ELSE '10 minutes' END), miner, count(*) AS n FROM blocks " +
			"GROUP BY session_window(block_ts, CASE WHEN miner = '0x1' THEN '5 minutes' ELSE '10 minutes' END), miner",
			gap: "case when (miner = '0x1') then '5 minutes' else '10 minutes' end", start: session.ColStart, end: session.ColEnd, columns: "block_ts,miner"},
	} {
		c, err := Compile(tc.q, o)
		if err != nil {
			t.Errorf("%s: %v", tc.q, err)
			continue
		}
		if len(c.Steps) != 1 || c.Steps[0].Aggregate == nil || c.Steps[0].Aggregate.Session == nil {
			t.Errorf("%s: steps %v", tc.q, c.Steps)
			continue
		}
		spec := c.Steps[0].Aggregate.SessionSpec()
		op, err := session.New(spec)
		if err != nil {
			t.Errorf("%s: %v", tc.q, err)
			continue
		}
		out := op.OutputSchema()
		if spec.GapText() != tc.gap || out.Fields[0].Name != tc.start || out.Fields[1].Name != tc.end ||
			spec.WatermarkDelay != 48*time.Hour || spec.Mode != agg.Append || strings.Join(c.Columns, ",") != tc.columns {
			t.Errorf("%s: gap %q, output %s, spec %+v, columns %v", tc.q, spec.GapText(), out, spec, c.Columns)
		}
	}
}

// TestSessionWindowRefusals: Spark's refusals (update mode, a global
// session aggregation) and a session window not selected or not grouped.
func TestSessionWindowRefusals(t *testing.T) {
	const group = " FROM blocks GROUP BY session_window(block_ts, '10 minutes'), miner"
	for _, tc := range []struct {
		q, mode, code, want string
	}{
		{"SELECT session_window, miner, count(*)" + group, "update", agg.CodeUnsupportedOutputMode, "Update output mode not supported for session window"},
		{"SELECT session_window, count(*) FROM blocks GROUP BY session_window(block_ts, '10 minutes')", "append", errcode.InvalidArgument, "Global aggregation with session window"},
		{"SELECT miner, count(*)" + group, "append", CodeInvalidQuery, "the session window is not selected"},
		{"SELECT session_window, miner, count(*) FROM blocks GROUP BY miner", "append", CodeInvalidQuery, "without GROUP BY session_window"},
		{"SELECT session_window(block_ts, '1 hour'), miner, count(*)" + group, "append", CodeInvalidQuery, "differs from GROUP BY"},
		{"SELECT session_window, miner, count(*) FROM blocks GROUP BY session_window(block_ts, gas_used), miner", "append", CodeInvalidQuery, "not a string"},
		{"SELECT session_window, miner, count(*) FROM blocks GROUP BY session_window(miner, '1 hour'), miner", "append", CodeInvalidQuery, "not a timestamp"},
		{"SELECT session_window AS s, miner, count(*)" + group, "append", CodeUnsupported, "renaming the session window"},
		{"SELECT session_window, miner, count(*) FROM blocks GROUP BY session_window(block_ts, '10 minutes'), window(block_ts, '5 minutes'), miner", "append", CodeUnsupported, "more than one window"},
	} {
		o := testOptions()
		o.OutputMode = tc.mode
		_, err := Compile(tc.q, o)
		if errcode.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %s %q", tc.q, err, tc.code, tc.want)
		}
	}
}
