// Command ethstream is the CLI of the ethstream streaming engine and its
// reference application (docs/contracts.md, CLI). It only wires packages together: each
// subcommand lives in its own file and registers itself on rootCmd in init.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:   "ethstream",
	Short: "A Go streaming engine with source evolution and state repartitioning, demonstrated on Ethereum data",
	Long: `ethstream re-creates Spark Structured Streaming's source evolution (named
sources, offset log V2, tombstones) and on-demand state repartitioning in Go.

Start with 'ethstream demo': it runs the whole lifecycle offline.`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

var cpuProfile string

func init() {
	// --version: the build info, as the ethstream_build_info metric carries it.
	bi := pipeline.ReadBuildInfo()
	rootCmd.Version = versionLine(bi)
	// The Delta commits' engineInfo and the Parquet files' created_by name
	// the same version (table history shows it).
	delta.EngineVersion = bi.Version
	rootCmd.SetVersionTemplate("ethstream {{.Version}}\n")
	rootCmd.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the command to FILE (go tool pprof)")
	stop := func() {}
	rootCmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		// A path flag with a scheme we cannot store to is wrong on the
		// command line alone: a usage error, before anything runs.
		if err := checkLocations(cmd); err != nil {
			return usage(err)
		}
		if err := checkListeners(cmd); err != nil {
			return err
		}
		s, err := startProfile()
		if err != nil {
			return err
		}
		stop = s
		return nil
	}
	cobra.OnFinalize(func() { stop(); stop = func() {} })
	// Flag mistakes are usage errors with a code and a remedy, like any other.
	rootCmd.SetFlagErrorFunc(flagError)
}

// commandPath is c's path below the root, with a trailing space ("" for the root).
func commandPath(c *cobra.Command) string {
	p := strings.TrimPrefix(c.CommandPath(), rootCmd.Name())
	return strings.TrimPrefix(p, " ") + map[bool]string{true: " ", false: ""}[p != ""]
}

// startProfile starts CPU profiling if --cpuprofile was given; the returned
// function stops it. It is never nil when err is nil.
func startProfile() (func(), error) {
	if cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(cpuProfile)
	if err != nil {
		reason := "it cannot be created"
		if errors.Is(err, fs.ErrNotExist) {
			reason = "its directory does not exist"
		} else if errors.Is(err, fs.ErrPermission) {
			reason = "permission denied"
		}
		return nil, errcode.New(errcode.InvalidArgument, cpuProfile, "pass --cpuprofile a file in an existing, writable directory",
			"cannot write the CPU profile %s: %s", cpuProfile, reason)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, errcode.New(errcode.InvalidArgument, cpuProfile, "profile one command at a time", "cannot start the CPU profile: %v", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// stopGrace is how long a command may take to wind down after SIGTERM or
// Ctrl-C before the process exits anyway: a shutdown stuck on a full disk
// must not outlive the signal. A second signal exits at once.
const stopGrace = 5 * time.Second

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		select {
		case <-sigs:
		case <-time.After(stopGrace):
		}
		fmt.Fprintf(os.Stderr, "error: INTERRUPTED: stopped by signal before the command could wind down; the next start recovers from the checkpoint\n")
		os.Exit(130)
	}()
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sigs)
	os.Exit(code)
}

// execute runs the CLI with args and returns the process exit code. Errors go to
// stderr as "error: <CODE>: <message>". A panic is a bug: it is reported
// as INTERNAL_ERROR with exit code 3 (2 is a usage error), never as a stack trace (the last
// resort; the packages return errors for everything a user can cause).
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "error: %s: %v. To fix: this is a bug in ethstream; the checkpoint is intact (every file is published whole), start again, and report the command and this message\n",
				errcode.Internal, r)
			code = 3
		}
	}()
	rootCmd.SetArgs(args)
	rootCmd.SetOut(stdout)
	rootCmd.SetErr(stderr)
	err := rootCmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	err = usageError(err)
	fmt.Fprintf(stderr, "error: %s\n", formatError(err))
	return exitCode(err)
}

// Exit codes: 0 success, 1 the command failed, 2 the command line alone is
// wrong (a usage error: nothing was read or done).
const (
	exitFailed = 1
	exitUsage  = 2
)

// usageErr marks an error found in the command line alone (a flag's syntax
// or value, a missing flag), before anything was read or done: exit 2. The
// same code found by looking at something (a path that is not a checkpoint)
// exits 1.
type usageErr struct{ error }

func (u usageErr) Unwrap() error { return u.error }

// usage marks err (if any) as a usage error.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return usageErr{err}
}

func exitCode(err error) int {
	var u usageErr
	if errors.As(err, &u) || errcode.Is(err, errcode.MissingFlag) {
		return exitUsage
	}
	return exitFailed
}

// usageError gives cobra's own command-line errors (unknown command, wrong
// argument count) a code and a remedy; flag errors get theirs from the flag
// error func.
func usageError(err error) error {
	if errcode.Code(err) != "" {
		return err
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "unknown command"):
		return usage(errcode.New(errcode.InvalidArgument, "", "run 'ethstream --help' for the commands", "%s", strings.SplitN(msg, "\n", 2)[0]))
	case strings.HasPrefix(msg, "required flag(s) "):
		flags := strings.Fields(strings.NewReplacer(`"`, "", ",", " ").Replace(strings.TrimSuffix(strings.TrimPrefix(msg, "required flag(s) "), " not set")))
		for i := range flags {
			flags[i] = "--" + flags[i]
		}
		return errcode.New(errcode.MissingFlag, "", "pass "+strings.Join(flags, " and ")+" (see --help)", "missing %s", strings.Join(flags, " and "))
	case strings.Contains(msg, "arg(s)"):
		return usage(errcode.New(errcode.InvalidArgument, "", "run the command with --help for its arguments", "%s", msg))
	}
	return err
}

// formatError puts the stable code first, once; errors without one are
// environment failures and get RUNTIME_ERROR.
func formatError(err error) string {
	// An exhausted resource is named as such even when it surfaced inside
	// another coded error (a read that hit EMFILE is not damage).
	if r := errcode.Resource(err); r != nil {
		return r.Error()
	}
	var e *errcode.Error
	if errors.As(err, &e) {
		if errors.Is(err, e) && err.Error() != e.Error() {
			// Wrapped with context: the code goes in front and is not
			// repeated where the coded error's own text begins.
			inner := e.Error()
			return e.Code + ": " + strings.Replace(err.Error(), inner, strings.TrimPrefix(inner, e.Code+": "), 1)
		}
		return err.Error()
	}
	if errors.Is(err, context.Canceled) {
		return "INTERRUPTED: stopped by signal; the next start recovers from the checkpoint"
	}
	return "RUNTIME_ERROR: " + err.Error()
}

// versionLine is what --version prints after "ethstream ": the version, the
// VCS revision where the build has one, the Go version.
func versionLine(bi pipeline.BuildInfo) string {
	if bi.Revision == "unknown" {
		return fmt.Sprintf("%s (no VCS revision: built with -buildvcs=false or outside a git checkout; %s)", bi.Version, bi.GoVersion)
	}
	return fmt.Sprintf("%s (revision %s, %s)", bi.Version, bi.Revision, bi.GoVersion)
}
