// Package docs holds the project's own contracts (contracts.md). Its tests keep
// the repository self-contained: nothing cites a document outside it, and every
// citation of contracts.md names a section that exists.
package docs

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// repoRoot is the directory holding go.mod, above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

// skipDirs are not part of the repository's content: version control, and the
// work and cache directories that .gitignore excludes (demo and bench output).
var skipDirs = map[string]bool{".git": true, "work": true, ".cache": true}

// textFiles calls fn for every text file of the repository with its path
// relative to root (slash-separated) and content. Files with a NUL byte in
// their first 8 KB are binary and skipped.
func textFiles(t *testing.T, root string, fn func(rel string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data[:min(len(data), 8<<10)], 0) >= 0 {
			return nil
		}
		fn(rel, data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The outside documents, spelled in pieces so that this file does not match
// itself.
var (
	outsideDocs = []string{"DESIGN" + ".md", "STYLE" + ".md"}
	// The reference directory beside the repository, by an absolute path or
	// by its documents.
	sharedDocs = regexp.MustCompile(`/work/` + `shared\b|\bshared/(DESIGN|STYLE|reference|hooks)\b`)
	// A relative path to it, or its fixtures: only tests may name those.
	sharedRel     = regexp.MustCompile(`\.\./` + `shared\b`)
	sharedFixture = regexp.MustCompile(`\bshared/` + `testdata\b`)
)

// TestNoOutsideReferences fails if any file of the repository (code, help
// texts, README, scripts, testdata) cites a document outside it or a path into
// the reference directory beside it. Only tests (a _test.go file, or a script
// under a testdata directory) may name the shared fixtures (../shared,
// shared/testdata), which they look up and skip when absent.
func TestNoOutsideReferences(t *testing.T) {
	root := repoRoot(t)
	files := 0
	textFiles(t, root, func(rel string, data []byte) {
		files++
		// internal/fixture is test support: only tests import it.
		isTest := strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "testdata/") || strings.Contains(rel, "/testdata/") ||
			strings.HasPrefix(rel, "internal/fixture/")
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for _, doc := range outsideDocs {
				if strings.Contains(line, doc) {
					t.Errorf("%s:%d cites %s, which is not in the repository; cite docs/contracts.md or a package doc instead: %s", rel, n, doc, strings.TrimSpace(line))
				}
			}
			if sharedDocs.MatchString(line) {
				t.Errorf("%s:%d names a path outside the repository: %s", rel, n, strings.TrimSpace(line))
			}
			if !isTest && (sharedRel.MatchString(line) || sharedFixture.MatchString(line)) {
				t.Errorf("%s:%d names the shared directory outside a test: %s", rel, n, strings.TrimSpace(line))
			}
		}
		if err := sc.Err(); err != nil {
			t.Errorf("read %s: %v", rel, err)
		}
	})
	if files < 100 {
		t.Fatalf("walked only %d files under %s: is the root right?", files, root)
	}
}

// citePrefix starts a citation of a section: the file name, then ", ", ": " or
// " (" and a capitalised section name.
var citePrefix = regexp.MustCompile(`docs/contracts\.md(, |: | \()`)

// TestContractCitations fails if code or docs cite a section of contracts.md
// that has no heading of that name, so a renamed section cannot leave stale
// pointers behind.
func TestContractCitations(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "docs", "contracts.md"))
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, line := range strings.Split(string(data), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			sections = append(sections, strings.TrimSpace(h))
		}
	}
	// Longest first, so that a name is never taken for a shorter one it starts with.
	sort.Slice(sections, func(i, j int) bool { return len(sections[i]) > len(sections[j]) })
	// The sections the code is known to cite; each must exist.
	for _, want := range []string{"Data", "Reference query", "Configuration", "Checkpoint", "Errors", "State",
		"Progress records", "Delta table", "CLI", "Targets", "Demo checks"} {
		if !slices.Contains(sections, want) {
			t.Errorf("docs/contracts.md has no section %q", want)
		}
	}
	citations := 0
	textFiles(t, root, func(rel string, data []byte) {
		if strings.HasPrefix(rel, "docs/") {
			return // the contracts themselves and this test
		}
		for n, line := range strings.Split(string(data), "\n") {
			for _, loc := range citePrefix.FindAllStringIndex(line, -1) {
				bad, ok := checkCitation(line[loc[1]:], sections)
				citations++
				if !ok {
					t.Errorf("%s:%d cites docs/contracts.md section %q, which has no heading: %s", rel, n+1, bad, strings.TrimSpace(line))
				}
			}
		}
	})
	if citations == 0 {
		t.Fatal("found no citation of docs/contracts.md sections; is the pattern right?")
	}
}

// checkCitation reads the section names at the start of rest: one name, then
// more after ", " or " through " ("Reference query through Progress records",
// "Reference query, State, Progress records"). The citation ends at the first
// text that does not start with a capital letter (ordinary prose). It returns
// the first few words of a name that is not a section.
func checkCitation(rest string, sections []string) (string, bool) {
	for rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
		found := ""
		for _, s := range sections {
			if strings.HasPrefix(rest, s) && (len(rest) == len(s) || !isLetter(rest[len(s)])) {
				found = s
				break
			}
		}
		if found == "" {
			words := strings.Fields(rest)
			return strings.Join(words[:min(len(words), 3)], " "), false
		}
		rest = rest[len(found):]
		switch {
		case strings.HasPrefix(rest, ", "):
			rest = rest[2:]
		case strings.HasPrefix(rest, " through "):
			rest = rest[len(" through "):]
		default:
			return "", true
		}
	}
	return "", true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
