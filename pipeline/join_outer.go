package pipeline

import (
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/query"
	"github.com/ethstream/ethstream/stream"
)

// joinedRows is the name a query over a join's rows reads them under
// (query/join_outer.go); no --source can be called it, since the join's
// relations name the sources.
const joinedRows = "joined"

// joinOuter appends to fq, the join, the query over its rows (WHERE,
// GROUP BY, HAVING, expressions), compiled as a one-input query against
// the join's output schema: its filter, derived columns, aggregation and
// post-aggregation stage become flow steps after the join, and each side's
// event-time column, under its name in the joined rows, is a watermark an
// aggregation after the join may window by (query.Options.EventTimes: the
// compiler takes the one its window reads).
func joinOuter(cfg Config, jq *query.JoinQuery, schemas [2]stream.Schema, fq *flow.Query) error {
	in, err := fq.Schema()
	if err != nil {
		return err
	}
	text, renames, err := jq.OuterQuery(joinedRows, schemas)
	if err != nil {
		return err
	}
	o, err := queryOptions(Config{Conf: cfg.Conf, OutputMode: cfg.OutputMode})
	if err != nil {
		return err
	}
	o.Sources, o.Schemas = []string{joinedRows}, []stream.Schema{in}
	o.Relations = []query.Relation{{Name: joinedRows, Sources: []int{0}}}
	for i, rel := range jq.Rels {
		if col, ok := jq.OutputName(schemas, i, rel.Watermark); rel.Watermark != "" && ok {
			o.EventTimes = append(o.EventTimes, query.EventTime{Column: col, Delay: rel.Delay})
		}
	}
	qc, err := query.Compile(text, o)
	if err != nil {
		return err
	}
	c := &compiled{q: qc, shaped: true, in: in}
	if err := c.buildSteps(); err != nil {
		return err
	}
	if qc.Where != nil {
		fq.Filter(qc.Where)
	}
	c.addSteps(fq)
	if c.op == nil && len(qc.Select) > 0 {
		cols := make([]flow.Column, len(qc.Select))
		for i, s := range qc.Select {
			cols[i] = flow.Col(s)
		}
		fq.Select(cols...)
	}
	return renameOutput(fq, renames)
}

// renameOutput gives the output columns in renames Spark's names (SELECT
// x.pair outputs pair), each where no other output column has it.
func renameOutput(fq *flow.Query, renames map[string]string) error {
	out, err := fq.Schema()
	if err != nil || len(renames) == 0 {
		return err
	}
	taken := map[string]int{}
	for _, f := range out.Fields {
		name := f.Name
		if to, ok := renames[name]; ok {
			name = to
		}
		taken[name]++
	}
	cols := make([]flow.Column, len(out.Fields))
	renamed := false
	for i, f := range out.Fields {
		cols[i] = flow.Col(f.Name)
		if to, ok := renames[f.Name]; ok && taken[to] == 1 {
			cols[i], renamed = cols[i].As(to), true
		}
	}
	if renamed {
		fq.Select(cols...)
	}
	return nil
}
