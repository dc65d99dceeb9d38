package main

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/sources/s3archive"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// knownList is the comma-separated option list an unknown-key error names.
func knownList(t *testing.T, err error, re string) []string {
	t.Helper()
	var e *errcode.Error
	if !errors.As(err, &e) {
		t.Fatalf("unknown option accepted or uncoded: %v", err)
	}
	m := regexp.MustCompile(re).FindStringSubmatch(e.Msg + " " + e.Remedy)
	if m == nil {
		t.Fatalf("no option list in %q", err)
	}
	return strings.Split(m[1], ", ")
}

// confKeys are the values of the Conf* constants of package checkpoint:
// every conf key the engine reads.
func confKeys(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../checkpoint/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Conf") {
				return true
			}
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, _ := strconv.Unquote(lit.Value)
				keys = append(keys, v)
			}
			return true
		})
	}
	if len(keys) < 5 {
		t.Fatalf("found only %v", keys)
	}
	return keys
}

// TestRunHelpIsComplete holds run --help to the parsers: it describes every
// URI option they accept (and each spelling it names parses), every conf key
// and every trigger spelling.
func TestRunHelpIsComplete(t *testing.T) {
	_, err := s3archive.ParseURI("s3://b/p?noSuchOption=1")
	s3keys := knownList(t, err, `known: ([^)]*)\)`)
	_, err = ethrpc.ParseURI("http://127.0.0.1:8545?noSuchOption=1")
	rpckeys := knownList(t, err, `valid options: (.*)$`)
	for _, k := range s3keys {
		if !regexp.MustCompile(`(?m)^    ` + k + `=`).MatchString(runLong) {
			t.Errorf("run --help does not describe s3archive option %s", k)
		}
	}
	for _, k := range rpckeys {
		if !regexp.MustCompile(`(?m)^    ` + k + `=`).MatchString(runLong) {
			t.Errorf("run --help does not describe ethrpc option %s", k)
		}
	}
	// The other spellings the help names are accepted.
	aliases := regexp.MustCompile(`spellings are both accepted: ([^.]*)\.`).FindStringSubmatch(strings.Join(strings.Fields(runLong), " "))
	if aliases == nil {
		t.Fatal("no spellings sentence")
	}
	for _, a := range strings.Split(aliases[1], ", ") {
		v := "1"
		if strings.Contains(strings.ToLower(a), "hash") {
			v = "0x" + strings.Repeat("ab", 32)
		}
		if _, err := ethrpc.ParseURI("http://127.0.0.1:8545?" + a + "=" + v); err != nil {
			t.Errorf("spelling %s named in the help is refused: %v", a, err)
		}
	}
	for _, k := range confKeys(t) {
		if !strings.Contains(runLong, "  "+k+"=") {
			t.Errorf("run --help does not describe conf %s", k)
		}
	}
	trig := runLong[strings.Index(runLong, "TRIGGERS"):]
	trig = trig[:strings.Index(trig, "\n\nOn a terminal")]
	spellings := regexp.MustCompile(`(?m)^  (\S+)(?: \(or (\S+)\))?`).FindAllStringSubmatch(trig, -1)
	if len(spellings) < 3 {
		t.Fatalf("trigger spellings: %v", spellings)
	}
	for _, m := range spellings {
		for _, s := range m[1:] {
			if s == "" {
				continue
			}
			if _, err := pipeline.ParseTrigger(strings.ReplaceAll(s, "DUR", "2s")); err != nil {
				t.Errorf("trigger %q in the help is refused: %v", s, err)
			}
		}
	}
}

// commandLines expands the ethstream command lines of a shell snippet with
// bash (variables, quotes, continuations) and returns their arguments.
func commandLines(t *testing.T, script string, env ...string) [][]string {
	t.Helper()
	// eval "$(ethstream ...)" sets variables: the command is checked, the
	// variables come from env.
	script = regexp.MustCompile(`(?m)^(\s*)eval "\$\((ethstream [^)]*)\)"`).ReplaceAllString(script, "$1$2")
	// A command sent to the background (cmd &) runs in the foreground, so
	// that its arguments are not interleaved with the next command's.
	script = regexp.MustCompile(`(?m)([^&])&(\s+#.*)?$`).ReplaceAllString(script, "$1$2")
	cmd := exec.Command("bash", "-c", `set -eu
ethstream() { printf '%s\0' "$@"; printf '\n\0'; }
`+script)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.Dir = t.TempDir() // an example's > FILE lands here
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("expand commands: %v\n%s", err, script)
	}
	var cmds [][]string
	var cur []string
	for _, a := range strings.Split(string(out), "\x00") {
		if a == "\n" {
			cmds = append(cmds, cur)
			cur = nil
			continue
		}
		if a != "" {
			cur = append(cur, a)
		}
	}
	return cmds
}

// validateCommand parses args as the CLI would and, for run and plan,
// parses every source, conf and trigger without starting anything.
func validateCommand(t *testing.T, args []string) {
	t.Helper()
	var c *cobra.Command
	switch {
	case len(args) > 0 && args[0] == "run":
		c = newRunCmd()
	case len(args) > 0 && args[0] == "plan":
		c = planCmd()
	default:
		found, rest, err := rootCmd.Find(args)
		if err != nil || found == rootCmd {
			t.Errorf("%q: no such command", args)
			return
		}
		if err := found.ParseFlags(rest); err != nil {
			t.Errorf("%q: %v", args, err)
		}
		return
	}
	if err := c.ParseFlags(args[1:]); err != nil {
		t.Errorf("%q: %v", args, err)
		return
	}
	srcs, _ := c.Flags().GetStringArray("source")
	for _, s := range srcs {
		spec, err := pipeline.ParseSourceSpec(s)
		if err == nil {
			_, err = pipeline.NewSource(spec, nil)
		}
		if err != nil {
			t.Errorf("%q: source %s: %v", args, s, err)
		}
	}
	confs, _ := c.Flags().GetStringArray("conf")
	if _, err := pipeline.ParseConf(confs); err != nil {
		t.Errorf("%q: %v", args, err)
	}
	if trig, _ := c.Flags().GetString("trigger"); trig != "" {
		if _, err := pipeline.ParseTrigger(trig); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// sampleEnv gives the placeholders of the examples a value.
var sampleEnv = []string{"LAST_BLOCK=26086569", "HEAD=26087569", "LAST_HASH=0x" + strings.Repeat("12", 32),
	"START_BLOCK=26086570", "START_PARENT_HASH=0x" + strings.Repeat("12", 32)}

func TestRunExamplesParse(t *testing.T) {
	cmds := commandLines(t, runExample, sampleEnv...)
	if len(cmds) != 6 {
		t.Fatalf("%d example commands, want the five phases and the public archive", len(cmds))
	}
	for _, args := range cmds {
		validateCommand(t, args)
	}
}

// TestHelpDefaults: no flag prints two defaults, and every flag a Use line
// names exists.
func TestHelpDefaults(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "(default") && f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "[]" {
				t.Errorf("%s --%s: usage %q and default %q both print a default", c.CommandPath(), f.Name, f.Usage, f.DefValue)
			}
		})
		for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(c.Use, -1) {
			if c.Flags().Lookup(m[1]) == nil && c.InheritedFlags().Lookup(m[1]) == nil {
				t.Errorf("%s: Use names --%s, which does not exist", c.CommandPath(), m[1])
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd)
}

// TestPlanTakesRunFlags: "a run command line becomes a plan by changing its
// first word" (plan --help, README).
func TestPlanTakesRunFlags(t *testing.T) {
	plan := planCmd()
	newRunCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if plan.Flags().Lookup(f.Name) == nil {
			t.Errorf("plan does not take run's --%s", f.Name)
		}
	})
}

// runnable is every command a user runs (not cobra's help and completion).
func runnable() []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || c.Hidden {
			return
		}
		if c.Runnable() && c != rootCmd {
			out = append(out, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd)
	return out
}

// TestEveryCommandHasAnExample: every command's help ends in an example, and
// each example command line parses as the CLI would parse it (flags, source
// URIs, confs, triggers) and runs that command.
func TestEveryCommandHasAnExample(t *testing.T) {
	cmds := runnable()
	if len(cmds) < 15 {
		t.Fatalf("only %d commands", len(cmds))
	}
	for _, c := range cmds {
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no Example", c.CommandPath())
			continue
		}
		lines := commandLines(t, c.Example, sampleEnv...)
		if len(lines) == 0 {
			t.Errorf("%s: its example runs no ethstream command:\n%s", c.CommandPath(), c.Example)
		}
		path := strings.Fields(strings.TrimPrefix(c.CommandPath(), rootCmd.Name()+" "))
		mine := false
		for _, args := range lines {
			validateCommand(t, args)
			if len(args) >= len(path) && strings.Join(args[:len(path)], " ") == strings.Join(path, " ") {
				mine = true
			}
		}
		if !mine {
			t.Errorf("%s: no example runs it:\n%s", c.CommandPath(), c.Example)
		}
	}
}

// TestHelpSaysWhatCommandsDo: the statements issue 25 found untrue stay
// true: plan's --table is optional, --with-watermark states one default,
// and checkpoint says it also repartitions.
func TestHelpSaysWhatCommandsDo(t *testing.T) {
	plan := planCmd()
	if u := plan.Flags().Lookup("table").Usage; strings.Contains(u, "required") {
		t.Errorf("plan --table: %q (it is optional)", u)
	}
	if u := newRunCmd().Flags().Lookup("table").Usage; !strings.Contains(u, "(required)") {
		t.Errorf("run --table: %q", u)
	}
	u := plan.Flags().Lookup("with-watermark").Usage
	if strings.Count(u, "default") != 1 || !strings.Contains(runLong, "(default: 'block_ts, 48 hours' for") ||
		!strings.Contains(u, "(default: 'block_ts, 48 hours' for the reference query, none for a --query)") {
		t.Errorf("--with-watermark: %q", u)
	}
	if !strings.Contains(checkpointCmd.Short, "repartition") {
		t.Errorf("checkpoint: %q", checkpointCmd.Short)
	}
}

// TestVersion: --version prints the version, VCS revision and Go version
// of the build, the labels of the ethstream_build_info metric.
func TestVersion(t *testing.T) {
	bi := pipeline.ReadBuildInfo()
	want := "ethstream " + versionLine(bi) + "\n"
	if delta.EngineVersion != bi.Version || strings.Contains(want, "(devel)") {
		t.Errorf("--version %q; Delta's engineInfo version %q", want, delta.EngineVersion)
	}
	for _, arg := range []string{"--version", "-v"} {
		code, out, errOut := cli(t, context.Background(), arg)
		if code != 0 || out != want {
			t.Errorf("%s: exit %d, %q %q, want %q", arg, code, out, errOut, want)
		}
	}
	if bi.GoVersion != runtime.Version() {
		t.Errorf("go version %q, want %q", bi.GoVersion, runtime.Version())
	}
}

// TestPlanShowsTheRecordedShape: plan never says "none recorded" of a
// checkpoint whose shape/ holds one: without --table (no shape to compare)
// it shows the recorded one.
func TestPlanShowsTheRecordedShape(t *testing.T) {
	rec := &shape.Shape{Keys: []string{"window", "source", "miner"}, Aggregates: []string{"count(*)"}, OutputMode: "update"}
	for _, c := range []struct {
		r    engine.PlanReport
		want string
	}{
		{engine.PlanReport{RecordedShape: rec}, "query shape: recorded (keys window, source, miner; aggregates count(*); update mode); pass --table to compare\n"},
		{engine.PlanReport{RecordedShape: rec, Shape: rec}, "query shape: unchanged\n"},
		{engine.PlanReport{Shape: rec}, "query shape: none recorded; this start records it\n"},
		{engine.PlanReport{}, ""},
	} {
		var b strings.Builder
		printShapeChanges(&b, &c.r)
		if b.String() != c.want {
			t.Errorf("got %q, want %q", b.String(), c.want)
		}
	}
}
