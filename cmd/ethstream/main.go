// Command ethstream is the CLI of the ethstream streaming engine and its
// reference application (docs/contracts.md, CLI). It only wires packages together: each
// subcommand lives in its own file and registers itself on rootCmd in init.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/ethstream/ethstream/errcode"
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
	rootCmd.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the command to FILE (go tool pprof)")
	stop := func() {}
	rootCmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		var err error
		stop, err = startProfile()
		return err
	}
	cobra.OnFinalize(func() { stop() })
}

// startProfile starts CPU profiling if --cpuprofile was given; the returned
// function stops it.
func startProfile() (func(), error) {
	if cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("create profile %s: %w", cpuProfile, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs the CLI with args and returns the process exit code. Errors go to
// stderr as "error: <CODE>: <message>".
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	rootCmd.SetArgs(args)
	rootCmd.SetOut(stdout)
	rootCmd.SetErr(stderr)
	err := rootCmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "error: %s\n", formatError(err))
	return 1
}

// formatError puts the stable code first; errors without one are flag or
// environment failures and get INVALID_ARGUMENT or RUNTIME_ERROR.
func formatError(err error) string {
	var e *errcode.Error
	if errors.As(err, &e) {
		if errors.Is(err, e) && err.Error() != e.Error() {
			// Wrapped with context: keep the code in front.
			return e.Code + ": " + err.Error()
		}
		return err.Error()
	}
	if errors.Is(err, context.Canceled) {
		return "INTERRUPTED: stopped by signal; the next start recovers from the checkpoint"
	}
	return "RUNTIME_ERROR: " + err.Error()
}
