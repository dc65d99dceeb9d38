package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/spf13/cobra"
)

// flagRanges are the valid values of the numeric flags whose domain is
// narrower than their Go type's; an out-of-range or malformed value names
// it. The commands check the same ranges after parsing.
var flagRanges = map[string]string{
	"max-batches":      "0 (no limit) to 9223372036854775807",
	"days":             fmt.Sprintf("1 to %d", chain.TotalDays),
	"partitions":       fmt.Sprintf("1 to %d", engine.MaxStatePartitions),
	"version":          "-1 (latest) or a table version, 0 or more",
	"batch":            "-1 (latest committed) or a batch id, 0 or more",
	"op":               "an operator id, 0 or more",
	"target-file-rows": "1 or more",
	"initial-blocks":   "0 or more",
	"live-batches":     "1 or more",
	"throttle-rate":    "0 to 1",
	"error-rate":       "0 to 1",
	"rate-429":         "0 to 1",
	"rate-5xx":         "0 to 1",
	"speed":            "a number above 0",
}

// typeRanges are the valid values of a flag of that pflag type.
var typeRanges = map[string]string{
	"int":     "a whole number from -9223372036854775808 to 9223372036854775807",
	"int64":   "a whole number from -9223372036854775808 to 9223372036854775807",
	"int32":   "a whole number from -2147483648 to 2147483647",
	"uint":    "a whole number from 0 to 18446744073709551615",
	"uint64":  "a whole number from 0 to 18446744073709551615",
	"float64": "a number",
	"bool":    "true or false",
}

// pflagValueErr is pflag's text for a value its parser refused.
var pflagValueErr = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-[^,]+, )?--([^"]+)" flag: (.*)$`)

// flagError turns a flag parsing error of c into one line a user can act
// on: the flag, the value, what is wrong with it and the valid range,
// instead of the parser's own text (strconv.ParseInt: ...).
func flagError(c *cobra.Command, err error) error {
	remedy := "run 'ethstream " + commandPath(c) + "--help' for the flags"
	m := pflagValueErr.FindStringSubmatch(err.Error())
	if m == nil {
		return usage(errcode.New(errcode.InvalidArgument, "", remedy, "%s", err.Error()))
	}
	value, name, cause := m[1], m[2], m[3]
	typ := ""
	if f := c.Flags().Lookup(name); f != nil {
		typ = f.Value.Type()
	}
	want := flagRanges[name]
	if want == "" {
		want = typeRanges[typ]
	}
	var what string
	switch {
	case typ == "duration":
		what, want = "is not a duration", "a Go duration such as 30s, 5m or 168h"
	case strings.Contains(cause, "value out of range"):
		what = "is out of range"
	case typ == "bool":
		what = "is not true or false"
	case typ == "float64":
		what = "is not a number"
	case strings.HasPrefix(typ, "int") || strings.HasPrefix(typ, "uint"):
		what = "is not a whole number"
	default:
		return usage(errcode.New(errcode.InvalidArgument, "", remedy, "%s", err.Error()))
	}
	return usage(errcode.New(errcode.InvalidArgument, "", fmt.Sprintf("--%s takes %s", name, want),
		"--%s %s %s", name, value, what))
}
