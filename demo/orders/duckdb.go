package orders

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// duckSQL is the customer-activity answer in DuckDB over order_events' data
// files (the table only ever appended, so its files are its rows): 30-minute
// windows per customer, the windows the final watermark (the newest event
// time less 20 minutes) closed, amounts in cents.
const duckSQL = `WITH w AS (
  SELECT time_bucket(INTERVAL 30 MINUTE, event_time) AS b, customer, count(*) AS n, CAST(round(sum(amount) * 100) AS BIGINT) AS cents
  FROM t GROUP BY ALL)
SELECT strftime(b, '%Y-%m-%dT%H:%M') AS ws, customer, n, cents FROM w
WHERE b + INTERVAL 30 MINUTE <= (SELECT max(event_time) FROM t) - INTERVAL 20 MINUTE
ORDER BY ws, customer`

// duckCount runs duckref (scripts/duckref, `duckref table GLOB QUERY`) as
// its own process and reads its CSV as "window-start customer" ->
// (events, cents).
func duckCount(bin, table string) (map[string][2]int64, error) {
	var out, stderr bytes.Buffer
	cmd := exec.Command(bin, "table", filepath.Join(table, "*.parquet"), duckSQL)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("duckref: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 {
		return nil, errNoDuckDB
	}
	res := map[string][2]int64{}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("duckref line %q", l)
		}
		n, err1 := strconv.ParseInt(f[2], 10, 64)
		c, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("duckref line %q", l)
		}
		res[f[0]+" "+f[1]] = [2]int64{n, c}
	}
	return res, nil
}
