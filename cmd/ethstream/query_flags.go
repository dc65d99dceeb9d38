package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/textwrap"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/shape"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// sqlFlags are the query text and Spark's query options, shared by run and
// plan.
type sqlFlags struct {
	query, queryFile, watermark, outputMode string
	dropDuplicates, dropDuplicatesWithin    string
	// flags tells a --query "" given (refused) from one not given (the
	// reference query).
	flags *pflag.FlagSet
}

func (f *sqlFlags) register(c *cobra.Command) {
	f.flags = c.Flags()
	c.Flags().StringVar(&f.query, "query", "", "the query in Spark SQL, e.g. \"SELECT window, miner, sum(gas_used) AS gas FROM blocks GROUP BY window(block_ts, '1 hour'), miner\" (default: the reference query)")
	c.Flags().StringVar(&f.queryFile, "query-file", "", "read the query from FILE")
	c.Flags().StringVar(&f.watermark, "with-watermark", "", "withWatermark: 'COLUMN, DELAY', e.g. 'block_ts, 1 hour'; a DELAY of 0 is a watermark at the max event time seen (default: 'block_ts, 48 hours' for the reference query, none for a --query)")
	c.Flags().StringVar(&f.outputMode, "output-mode", "", "outputMode: update (default), append or complete")
	c.Flags().StringVar(&f.dropDuplicates, "drop-duplicates", "", "dropDuplicates on the unioned rows before the query: 'COLUMN, ...', e.g. 'hash'; with a join, on each relation's rows before it ('a.hash': relation a's only)")
	c.Flags().StringVar(&f.dropDuplicatesWithin, "drop-duplicates-within-watermark", "", "dropDuplicatesWithinWatermark on the unioned rows before the query: 'COLUMN, ...', e.g. 'hash' (needs --with-watermark)")
}

// apply sets the query fields of cfg.
func (f *sqlFlags) apply(cfg *pipeline.Config) error {
	if f.query != "" && f.queryFile != "" {
		return errcode.New(errcode.InvalidArgument, "", "pass either --query or --query-file", "both --query and --query-file given")
	}
	if f.flags != nil && f.flags.Changed("query") && strings.TrimSpace(f.query) == "" {
		return errcode.New(errcode.InvalidArgument, "", "pass the query's text (SELECT ...), or leave --query out for the reference query",
			"--query is empty")
	}
	if f.flags != nil && f.flags.Changed("query-file") && f.queryFile == "" {
		return errcode.New(errcode.InvalidArgument, "", "pass --query-file FILE, or leave it out for the reference query", "--query-file names no file")
	}
	cfg.Query = f.query
	if f.queryFile != "" {
		b, err := os.ReadFile(f.queryFile)
		if err != nil {
			return errcode.Wrap(err, errcode.InvalidArgument, f.queryFile, "pass a readable file", "cannot read --query-file")
		}
		cfg.Query = string(b)
		if strings.TrimSpace(cfg.Query) == "" {
			return errcode.New(errcode.InvalidArgument, f.queryFile, "write the query into the file", "--query-file is empty")
		}
	}
	cfg.WithWatermark, cfg.OutputMode = f.watermark, f.outputMode
	cfg.DropDuplicates, cfg.DropDuplicatesWithinWatermark = f.dropDuplicates, f.dropDuplicatesWithin
	return nil
}

// printShapeChanges prints plan's query-shape section: each difference
// between the recorded and the new shape, old -> new, with Spark's rule,
// ours, and whether the start may go on.
func printShapeChanges(b *strings.Builder, r *engine.PlanReport) {
	switch {
	case r.Shape == nil && r.RecordedShape != nil:
		// plan without --table builds no whole shape to compare; it still
		// shows what the checkpoint recorded.
		rs := r.RecordedShape
		fmt.Fprintf(b, "query shape: recorded (keys %s; aggregates %s; %s mode); pass --table to compare\n",
			orDash(strings.Join(rs.Keys, ", ")), orDash(strings.Join(rs.Aggregates, ", ")), orDash(rs.OutputMode))
		return
	case r.Shape == nil:
		return
	case r.RecordedShape == nil && r.ErrorCode != "":
		// A start refused before the shapes were compared: the refusal
		// below is the whole answer (the checkpoint may well hold a shape).
		return
	case r.RecordedShape == nil:
		b.WriteString("query shape: none recorded; this start records it\n")
		return
	case len(r.ShapeChanges) == 0:
		b.WriteString("query shape: unchanged\n")
		return
	}
	b.WriteString("query shape changes:\n")
	for _, c := range r.ShapeChanges {
		verdict := fmt.Sprintf("allowed from batch %d", c.FirstBatchID)
		if !c.Allowed {
			verdict = "REFUSED " + c.Code
		}
		fmt.Fprintf(b, "  %s: %s -> %s\n    %s\n", c.Change, orDash(c.Old), orDash(c.New), verdict)
		b.WriteString(textwrap.Words("    Spark: "+c.SparkRule, "      ", planWidth))
		b.WriteString(textwrap.Words("    ethstream: "+c.Rule, "      ", planWidth))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printOperators prints, for a plan of several stateful operators, each
// one's id (its state/<id>, stateOperators[] entry and `state dump --op`)
// as the start gives them: Spark's, counted from the sink, or flow order on
// a checkpoint that started with it. A plan of one prints nothing: its
// operator is 0 either way.
func printOperators(b *strings.Builder, r *engine.PlanReport) {
	s := r.Shape
	if s == nil {
		s = r.RecordedShape
	}
	if s == nil || len(s.OperatorList()) < 2 {
		return
	}
	how := "flow order, as this checkpoint numbers them"
	if s.Numbering == shape.NumberingPreOrder {
		how = "Spark's ids, from the sink"
	}
	fmt.Fprintf(b, "stateful operators (%s):\n", how)
	for _, o := range s.OperatorList() {
		what := strings.Join(o.Keys, ", ")
		if o.Window != nil {
			what = strings.Join(append([]string{"window(" + o.Window.Column + ")"}, o.Keys...), ", ")
		}
		if o.Side != "" {
			// Below the join, on one relation's rows (a tree-shaped plan).
			fmt.Fprintf(b, "    %d %s (%s) on the join's %s side: state/%d\n", o.ID, o.Kind, orDash(what), o.Side, o.ID)
			continue
		}
		fmt.Fprintf(b, "  %d %s (%s): state/%d\n", o.ID, o.Kind, orDash(what), o.ID)
	}
}

// printJoinFilters prints, for a stream-stream join whose WHERE runs partly
// below it (join/pushdown.go), the type the join runs as and the
// filter on each side; the conjuncts left above the join run after it (a
// next operator's input).
func printJoinFilters(b *strings.Builder, r *engine.PlanReport) {
	s := r.Shape
	if s == nil || s.Filter == "" {
		return
	}
	for _, o := range s.OperatorList() {
		if o.Kind == shape.KindJoin {
			fmt.Fprintf(b, "join (operator %d) runs as %s; WHERE below it, per side: %s\n", o.ID, o.JoinType, s.Filter)
		}
	}
}
