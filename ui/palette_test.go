package ui

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPaletteMatchesTheDashboard: the dashboard's script colours sources and
// partition counts with the lists the demo's charts use.
func TestPaletteMatchesTheDashboard(t *testing.T) {
	b, err := static.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	oi := map[string]string{}
	for _, m := range regexp.MustCompile(`(\w+): '(#[0-9A-F]{6})'`).FindAllStringSubmatch(js[strings.Index(js, "const OI"):], -1) {
		oi[m[1]] = m[2]
	}
	var sources []string
	block := js[strings.Index(js, "const SOURCE_STYLES"):]
	block = block[:strings.Index(block, "];")]
	for _, m := range regexp.MustCompile(`color: OI\.(\w+)`).FindAllStringSubmatch(block, -1) {
		sources = append(sources, oi[m[1]])
	}
	if !slices.Equal(sources, SourceColors) {
		t.Errorf("app.js SOURCE_STYLES %v, palette.go SourceColors %v", sources, SourceColors)
	}
	m := regexp.MustCompile(`const PARTITION_COLORS = \[([^\]]*)\]`).FindStringSubmatch(js)
	if m == nil {
		t.Fatal("app.js has no PARTITION_COLORS")
	}
	parts := regexp.MustCompile(`#[0-9A-F]{6}`).FindAllString(m[1], -1)
	if !slices.Equal(parts, PartitionColors) {
		t.Errorf("app.js PARTITION_COLORS %v, palette.go PartitionColors %v", parts, PartitionColors)
	}
	if oi["vermillion"] != ControlColor {
		t.Errorf("control colour %s, app.js vermillion %s", ControlColor, oi["vermillion"])
	}
}
