package main

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestNumericFlagErrors: every numeric and duration flag of every command,
// given a value its parser refuses, says which flag, that the value is out
// of range or not a number, and the flag's valid values: never strconv's or
// time's own text.
func TestNumericFlagErrors(t *testing.T) {
	ctx := context.Background()
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[1:]
		c.Flags().VisitAll(func(f *pflag.Flag) {
			var bad []struct{ value, what string }
			switch f.Value.Type() {
			case "int", "int64", "uint", "uint64":
				bad = append(bad, struct{ value, what string }{"99999999999999999999", "is out of range"},
					struct{ value, what string }{"1.5", "is not a whole number"})
			case "float64":
				bad = append(bad, struct{ value, what string }{"1e999", "is out of range"},
					struct{ value, what string }{"lots", "is not a number"})
			case "duration":
				bad = append(bad, struct{ value, what string }{"99999999999h", "is not a duration"},
					struct{ value, what string }{"soon", "is not a duration"})
			default:
				return
			}
			for _, b := range bad {
				n++
				args := append(append([]string{}, path...), "--"+f.Name, b.value)
				code, _, errOut := cli(t, ctx, args...)
				checkRefusal(t, strings.Join(args, " "), code, errOut, "INVALID_ARGUMENT", 2)
				want := "--" + f.Name + " " + b.value + " " + b.what
				if !strings.Contains(errOut, want) || !strings.Contains(errOut, "To fix: --"+f.Name+" takes ") {
					t.Errorf("%q: stderr %q, want %q and the valid values", args, errOut, want)
				}
				if strings.Contains(errOut, "time: ") || strings.Contains(errOut, "parsing ") {
					t.Errorf("%q: parser text in %q", args, errOut)
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd)
	if n < 20 {
		t.Fatalf("only %d numeric flag values tried", n)
	}
}
