package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/ethstream/ethstream/demo"
	"github.com/spf13/cobra"
)

// freshnessFlags are bench --freshness and its options.
type freshnessFlags struct {
	on       bool
	blocks   int
	rate     float64
	endpoint string
	poll     time.Duration
	queries  []string
}

func (f *freshnessFlags) register(c *cobra.Command) {
	c.Flags().BoolVar(&f.on, "freshness", false, "measure head-to-table freshness instead: the reference query under --trigger real-time follows a node's newHeads; per block, the commit of its batch minus the node's announcement (p50/p99), RSS, table and checkpoint file counts")
	c.Flags().IntVar(&f.blocks, "blocks", 300, "with --freshness: blocks measured (10000 at 10 blocks/s is about 17 minutes)")
	c.Flags().Float64Var(&f.rate, "rate", 10, "with --freshness: blocks per second the in-repo node mines")
	c.Flags().DurationVar(&f.poll, "poll", 0, "with --freshness: follow the in-repo node over http with --trigger processing-time=DUR instead (how a live query ran before head following), for a side-by-side figure")
	c.Flags().StringSliceVar(&f.queries, "freshness-query", nil, "with --freshness: the query to follow the head with (repeatable, or all: each run in turn, its targets named after it; "+strings.Join(demo.FreshnessQueryNames(), ", ")+"; default reference)")
	c.Flags().StringVar(&f.endpoint, "endpoint", "", "with --freshness: ws:// URL of an external node (e.g. geth --dev --ws) instead of the in-repo node; freshness counts from the arrival of its newHeads notification")
}

func (f *freshnessFlags) run(cmd *cobra.Command, workdir string, seed int64, out string) error {
	names, err := demo.SelectFreshnessQueries(f.queries)
	if err != nil {
		return usage(err)
	}
	var all []*demo.FreshnessResult
	var targets []demo.Target
	for i, q := range names {
		if i > 0 {
			fmt.Fprintln(cmd.OutOrStdout())
		}
		res, err := demo.BenchFreshness(cmd.Context(), demo.FreshnessOptions{WorkDir: workdir, Seed: seed, Blocks: f.blocks,
			Rate: f.rate, Endpoint: f.endpoint, Poll: f.poll, Query: q, Log: cmd.ErrOrStderr()})
		if err != nil {
			return err
		}
		demo.PrintFreshness(cmd.OutOrStdout(), res)
		all, targets = append(all, res), append(targets, res.Targets...)
	}
	if out != "" {
		// One query: its result, as before; several: a list of them.
		if len(all) == 1 {
			err = demo.WriteFreshnessJSON(out, all[0])
		} else {
			err = demo.WriteFreshnessListJSON(out, all)
		}
		if err != nil {
			return err
		}
	}
	return demo.MissedTargets(targets)
}
