package demo

import (
	"slices"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/pipeline"
)

// FreshnessQuery is a query bench --freshness follows the head with
// (issue 43, target 4: freshness as queries grow): the reference query, and
// heavier ones, each judged against the same head-to-table targets.
type FreshnessQuery struct {
	Name string
	What string
	// Config sets the run's query on c (the reference query when it sets
	// nothing).
	Config func(c *pipeline.Config)
	// Table is the ethrpc table the source reads ("" = blocks): the node
	// then serves its blocks' bodies, continuing an archive with that table.
	Table string
}

// freshnessQueries are the queries --freshness-query names.
var freshnessQueries = []FreshnessQuery{
	{Name: "reference", What: "the reference query (5-minute windows by source and miner, update mode)",
		Config: func(*pipeline.Config) {}},
	{Name: "where", What: "the reference query over the blocks a WHERE keeps",
		Config: func(c *pipeline.Config) {
			c.Query = "SELECT window(block_ts, '5 minutes') AS window, source, miner, count(*) AS count FROM blocks " +
				"WHERE gas_used > 0 AND transaction_count >= 0 GROUP BY window(block_ts, '5 minutes'), source, miner"
			c.WithWatermark = pipeline.ReferenceWatermark
		}},
	{Name: "two-stateful", What: "two stateful operators: dropDuplicatesWithinWatermark(hash), then the reference aggregation",
		Config: func(c *pipeline.Config) {
			c.Query, c.WithWatermark, c.DropDuplicatesWithinWatermark = pipeline.ReferenceQuery, pipeline.ReferenceWatermark, "hash"
		}},
	{Name: "transactions", What: "the transactions table (ethrpc table=transactions): fees per hour per transaction type",
		Table: ethtables.Transactions,
		Config: func(c *pipeline.Config) {
			c.Query, c.WithWatermark = TxQuery, TxWatermark
		}},
}

// FreshnessQueryNames lists the names --freshness-query takes.
func FreshnessQueryNames() []string {
	var ns []string
	for _, q := range freshnessQueries {
		ns = append(ns, q.Name)
	}
	return ns
}

// SelectFreshnessQueries resolves --freshness-query's names ("all" for
// every one; none: the reference query) in freshnessQueries' order, and
// refuses an unknown one before anything runs.
func SelectFreshnessQueries(names []string) ([]string, error) {
	if len(names) == 0 {
		return []string{"reference"}, nil
	}
	var out []string
	for _, q := range freshnessQueries {
		if slices.Contains(names, "all") || slices.Contains(names, q.Name) {
			out = append(out, q.Name)
		}
	}
	for _, n := range names {
		if n != "all" && !slices.Contains(out, n) {
			return nil, errcode.New(errcode.InvalidArgument, "", "pass one of: all, "+strings.Join(FreshnessQueryNames(), ", "),
				"--freshness-query %q is not a freshness query", n)
		}
	}
	return out, nil
}

// freshnessQuery is the query named name (SelectFreshnessQueries checked it).
func freshnessQuery(name string) FreshnessQuery {
	if name == "" {
		name = "reference"
	}
	i := slices.IndexFunc(freshnessQueries, func(q FreshnessQuery) bool { return q.Name == name })
	if i < 0 {
		panic("demo: unknown freshness query " + name)
	}
	return freshnessQueries[i]
}
