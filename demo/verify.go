package demo

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Check is one line of verification.csv. Figure lines report a number and
// never fail.
type Check struct {
	Name     string
	Expected string
	Actual   string
	Pass     bool
	Figure   bool
}

// Result markers, the same in verification.csv, summary.txt and the README.
const (
	ResultPass   = "PASS"
	ResultFail   = "FAIL"
	ResultFigure = "figure"
)

// Result is the check's marker: PASS, FAIL, or figure for a reported number.
func (c Check) Result() string {
	switch {
	case c.Figure:
		return ResultFigure
	case c.Pass:
		return ResultPass
	}
	return ResultFail
}

// WriteChecks writes verification.csv: check, expected, actual, result.
func WriteChecks(path string, checks []Check) error {
	return writeFile(path, func(f io.Writer) error {
		w := csv.NewWriter(f)
		w.Write([]string{"check", "expected", "actual", "result"})
		for _, c := range checks {
			w.Write([]string{c.Name, c.Expected, c.Actual, c.Result()})
		}
		w.Flush()
		return w.Error()
	})
}

func check(name string, expected, actual any) Check {
	e, a := fmt.Sprint(expected), fmt.Sprint(actual)
	return Check{Name: name, Expected: e, Actual: a, Pass: e == a}
}

func figure(name string, actual any) Check {
	return Check{Name: name, Expected: "", Actual: fmt.Sprint(actual), Figure: true}
}

// PrintSummary prints the phase-by-phase table and the checks.
func PrintSummary(w io.Writer, rep *Report, batches []BatchRecord) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tsources\tbatches\trows in\tstate keys\tpartitions\ttime\tresult")
	for _, p := range rep.Phases {
		var ids []int64
		var rows, keys, parts int64
		for _, b := range batches {
			if b.Phase == p.Name {
				ids = append(ids, b.BatchID)
				rows += b.NumInputRows
				keys, parts = b.StateRowsTotal, b.StatePartitions
			}
		}
		span := "-"
		if len(ids) > 0 {
			span = fmt.Sprintf("%d-%d", ids[0], ids[len(ids)-1])
		}
		// The code of a refusal is in the checks (and the phase's line
		// above): the table keeps to 100 columns.
		result := "ok"
		if p.Err != nil {
			result = "refused"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", p.Name, strings.Join(p.Sources, ","), span, rows, keys, parts,
			p.Duration.Round(time.Millisecond), result)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, c := range rep.Checks {
		fmt.Fprint(w, checkLine(c, summaryWidth))
	}
	fmt.Fprintf(w, "\narchive rows %d + live blocks %d; wall time %s\n", rep.ArchiveRows, rep.LiveBlocks, rep.WallTime.Round(time.Millisecond))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// liveOffset is the ethrpc offset JSON.
type liveOffset struct {
	Block uint64 `json:"block"`
	Hash  string `json:"hash"`
}

func parseLive(s string) (liveOffset, bool) {
	var o liveOffset
	if s == "" || s == "null" {
		return o, false
	}
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		return o, false
	}
	return o, true
}
