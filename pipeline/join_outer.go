package pipeline

import (
	"slices"

	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/query"
	"github.com/ethstream/ethstream/stream"
)

// joinedRows is the name a query over a join's rows reads them under
// (query/join_outer.go); no --source can be called it, since the join's
// relations name the sources.
const joinedRows = "joined"

// joinOuter appends to fq, the join, the query over its rows (WHERE,
// GROUP BY, HAVING, expressions), compiled as a one-input query against
// the join's output schema: its filter (the conjuncts of the WHERE not
// pushed below the join, rest), derived columns, aggregation and
// post-aggregation stage become flow steps after the join, and each side's
// event-time column, under its name in the joined rows, is a watermark an
// aggregation after the join may window by (query.Options.EventTimes: the
// compiler takes the one its window reads).
func joinOuter(cfg Config, jq *query.JoinQuery, schemas [2]stream.Schema, fq *flow.Query, rest filter.Expr) error {
	qc, renames, o, err := compileJoinOuter(cfg, jq, schemas, fq)
	if err != nil {
		return err
	}
	in, _ := fq.Schema()
	c := &compiled{q: qc, shaped: true, in: in}
	if err := c.buildSteps(); err != nil {
		return err
	}
	if rest != nil {
		p, err := filter.CompileWith(rest, func(name string) (stream.Type, bool) {
			if f := in.Field(name); f != nil {
				return f.Type, true
			}
			return 0, false
		}, filter.Options{NonANSI: o.NonANSI})
		if err != nil {
			return err
		}
		fq.Filter(p)
	}
	c.addSteps(fq)
	projected := slices.ContainsFunc(qc.Steps, func(st query.Step) bool { return st.Project != nil })
	if c.op == nil && len(qc.Select) > 0 && !projected {
		// A SELECT of columns the plan has not projected yet (one with
		// aliases is a Project step, and its input names are gone).
		cols := make([]flow.Column, len(qc.Select))
		for i, s := range qc.Select {
			cols[i] = flow.Col(s)
		}
		fq.Select(cols...)
	}
	return renameOutput(fq, renames)
}

// compileJoinOuter compiles the query over the rows of fq, a join.
func compileJoinOuter(cfg Config, jq *query.JoinQuery, schemas [2]stream.Schema, fq *flow.Query) (*query.Compiled, map[string]string, query.Options, error) {
	in, err := fq.Schema()
	if err != nil {
		return nil, nil, query.Options{}, err
	}
	text, renames, err := jq.OuterQuery(joinedRows, schemas)
	if err != nil {
		return nil, nil, query.Options{}, err
	}
	o, err := queryOptions(Config{Conf: cfg.Conf, OutputMode: cfg.OutputMode})
	if err != nil {
		return nil, nil, o, err
	}
	o.Sources, o.Schemas = []string{joinedRows}, []stream.Schema{in}
	o.Relations = []query.Relation{{Name: joinedRows, Sources: []int{0}}}
	for i, rel := range jq.Rels {
		if col, ok := jq.OutputName(schemas, i, rel.Watermark); rel.Watermark != "" && ok {
			o.EventTimes = append(o.EventTimes, query.EventTime{Column: col, Delay: rel.Delay})
		}
	}
	qc, err := query.Compile(text, o)
	return qc, renames, o, err
}

// joinPushdown is where the WHERE over the rows of declared, the join as
// written, runs (query.JoinQuery.Pushdown), and whether it compiles in
// non-ANSI mode.
func joinPushdown(cfg Config, jq *query.JoinQuery, schemas [2]stream.Schema, declared *flow.Query) (join.Pushed, bool, error) {
	qc, _, o, err := compileJoinOuter(cfg, jq, schemas, declared)
	if err != nil {
		return join.Pushed{}, false, err
	}
	var where filter.Expr
	if qc.Where != nil {
		where = qc.Where.Expr()
	}
	return jq.Pushdown(where, schemas, filter.Options{NonANSI: o.NonANSI}), o.NonANSI, nil
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
