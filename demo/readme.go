package demo

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The README shows what the reference run wrote: the block between
// "<!-- RESULTS-SUMMARY -->" and "<!-- /RESULTS-SUMMARY -->" is the phase table
// of summary.txt, the block between "<!-- RESULTS-CHECKS -->" and
// "<!-- /RESULTS-CHECKS -->" is verification.csv as a table, with the same
// result markers; the block between "<!-- RESULTS-REORG -->" and
// "<!-- /RESULTS-REORG -->" is the first batch of live_reorgs that retracted
// blocks (results/reorgs/). RenderREADME recomputes them from a results directory, so
// `ethstream demo --readme README.md` keeps them true and a test can tell
// when they are not.

// RenderREADME returns readme with its results blocks rendered from the files
// in resultsDir (named in the text as results/).
func RenderREADME(readme, resultsDir string) (string, error) {
	summary, err := os.ReadFile(filepath.Join(resultsDir, "summary.txt"))
	if err != nil {
		return "", fmt.Errorf("read summary: %w", err)
	}
	checks, err := readChecks(filepath.Join(resultsDir, "verification.csv"))
	if err != nil {
		return "", err
	}
	out, err := replaceBlock(readme, "RESULTS-SUMMARY", summaryBlock(string(summary)))
	if err != nil {
		return "", err
	}
	if out, err = replaceBlock(out, "RESULTS-CHECKS", checksBlock(checks)); err != nil {
		return "", err
	}
	reorg, err := reorgBlock(filepath.Join(resultsDir, "reorgs"))
	if err != nil {
		return "", err
	}
	return replaceBlock(out, "RESULTS-REORG", reorg)
}

// reorgBlock shows the first batch of live_reorgs that retracted blocks: its
// offsets (sources.csv) and what it retracted (reorgs.csv), hashes shortened.
func reorgBlock(dir string) (string, error) {
	reorgs, err := readCSV(filepath.Join(dir, "reorgs.csv"))
	if err != nil {
		return "", err
	}
	sources, err := readCSV(filepath.Join(dir, "sources.csv"))
	if err != nil {
		return "", err
	}
	var missing error
	get := func(t *csvTable, row []string, col string) string {
		v, err := t.str(row, col)
		missing = cmp.Or(missing, err)
		return v
	}
	hash := regexp.MustCompile(`"(0x[0-9a-f]{8})[0-9a-f]{56}"`)
	short := func(s string) string { return hash.ReplaceAllString(s, `"$1…"`) }
	tip := func(s string) string { return s[:min(10, len(s))] + "…" }
	for _, r := range reorgs.rows {
		if n := get(reorgs, r, "blocks_retracted"); n == "" || n == "0" {
			continue
		}
		batch, start := get(reorgs, r, "batch_id"), get(reorgs, r, "start")
		for _, s := range sources.rows {
			if get(sources, s, "batch_id") != batch || get(sources, s, "phase") != PhaseLiveReorgs+"#"+start {
				continue
			}
			block := fmt.Sprintf("```\nbatch %s (start %s)\nstartOffset %s\nendOffset   %s\nreorg depth %s, tip %s -> %s: %s blocks retracted, %s inserted\n```\n",
				batch, start, short(get(sources, s, "start_offset")), short(get(sources, s, "end_offset")), get(reorgs, r, "reorg_depth"),
				tip(get(reorgs, r, "old_tip")), tip(get(reorgs, r, "new_tip")), get(reorgs, r, "blocks_retracted"), get(reorgs, r, "blocks_inserted"))
			return block, missing
		}
		return "", cmp.Or(missing, fmt.Errorf("%s: batch %s of start %s has no line in sources.csv", dir, batch, start))
	}
	return "", cmp.Or(missing, fmt.Errorf("%s/reorgs.csv: no batch retracted blocks", dir))
}

// summaryBlock is the phase table of summary.txt and its closing line.
func summaryBlock(summary string) string {
	lines := strings.Split(strings.TrimRight(summary, "\n"), "\n")
	var phases []string
	for _, l := range lines {
		if l == "" {
			break
		}
		phases = append(phases, strings.TrimRight(l, " "))
	}
	last := lines[len(lines)-1]
	return "What the reference run printed (`results/summary.txt`, result markers as in\n" +
		"`results/verification.csv`):\n\n```\n" + strings.Join(phases, "\n") + "\n" + last + "\n```\n"
}

func readChecks(path string) ([]Check, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(recs) == 0 || strings.Join(recs[0], ",") != "check,expected,actual,result" {
		return nil, fmt.Errorf("%s: unexpected header", path)
	}
	var cs []Check
	for _, r := range recs[1:] {
		cs = append(cs, Check{Name: r[0], Expected: r[1], Actual: r[2], Pass: r[3] == ResultPass, Figure: r[3] == ResultFigure})
	}
	return cs, nil
}

// checksBlock renders the checks as a Markdown table; long values (hashes)
// are shortened to their ends.
func checksBlock(cs []Check) string {
	short := func(s string) string {
		if r := []rune(s); len(r) > 40 {
			return string(r[:18]) + "…" + string(r[len(r)-8:])
		}
		return s
	}
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	var b strings.Builder
	b.WriteString("| check | expected | actual | result |\n|---|---|---|---|\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(c.Name), cell(short(c.Expected)), cell(short(c.Actual)), c.Result())
	}
	return b.String()
}

func replaceBlock(doc, name, body string) (string, error) {
	begin, end := "<!-- "+name+" -->\n", "<!-- /"+name+" -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("README has no %s ... %s block", strings.TrimSpace(begin), end)
	}
	return doc[:i+len(begin)] + body + doc[j:], nil
}

// UpdateREADME rewrites the results blocks of the README at path from
// resultsDir, crash-safely.
func UpdateREADME(path, resultsDir string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	out, err := RenderREADME(string(b), resultsDir)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeFile(path, func(w io.Writer) error {
		_, err := io.WriteString(w, out)
		return err
	})
}
