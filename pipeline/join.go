package pipeline

import (
	"log/slog"
	"strings"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/query"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// buildJoin is Build for a stream-stream join in SQL (query.ParseJoin):
// each relation reads the --source of its name, with its WATERMARK clause,
// through flow.Query.Join, then the SELECT list; the output is appended.
func buildJoin(cfg Config, logger *slog.Logger) (*flow.Query, error) {
	jq, err := query.ParseJoin(cfg.Query)
	if err != nil {
		return nil, err
	}
	if cfg.WithWatermark != "" {
		return nil, errcode.New(errcode.InvalidArgument, "", "write each relation's watermark in the query: FROM a WATERMARK ts DELAY OF INTERVAL 1 HOUR AS x JOIN ...",
			"--with-watermark sets one watermark; a join's relations have their own")
	}
	if err := join.CheckOutputMode(cfg.OutputMode); err != nil {
		return nil, err
	}
	var sides [2]*flow.Side
	var schemas [2]stream.Schema
	used := map[string]bool{}
	for i, rel := range jq.Rels {
		sides[i] = flow.From(rel.Ref())
		// A relation unions its sources (FROM (SELECT * FROM a1 UNION ALL
		// SELECT * FROM a2) AS x): the side reads each under its own name,
		// so each keeps its offsets and source evolution adds or removes
		// it as on a one-input query.
		for _, name := range rel.Sources {
			var spec *SourceSpec
			for j := range cfg.Sources {
				if strings.EqualFold(cfg.Sources[j].Name, name) {
					spec = &cfg.Sources[j]
				}
			}
			if spec == nil {
				return nil, errcode.New(errcode.InvalidArgument, "", "pass --source "+name+"=FORMAT:URI",
					"the join reads relation %s, which names no --source", name)
			}
			used[spec.Name] = true
			src, err := newSource(*spec, logger, cfg.ArchiveFS, cfg.Conf)
			if err != nil {
				return nil, err
			}
			sides[i].Read(spec.Name, src)
		}
		if rel.Watermark != "" {
			sides[i].WithWatermark(rel.Watermark, rel.Delay)
		}
		schema, err := sides[i].Schema()
		if err != nil {
			return nil, err
		}
		schemas[i] = schema
	}
	if err := joinDedups(cfg, jq, sides, schemas); err != nil {
		return nil, err
	}
	for _, s := range cfg.Sources {
		if !used[s.Name] {
			return nil, errcode.New(errcode.InvalidArgument, "", "read every --source in the join, or leave it out",
				"--source %s is neither relation of the join", s)
		}
	}
	// Each side stores and carries only the columns the query reads above
	// the join (query.JoinQuery.Columns), as Spark's ColumnPruning; a
	// restart reading a column the stored rows lack is refused at the
	// join's Open (join/stored.go).
	on := flow.JoinOn{Type: jq.Type, LeftKeys: jq.LeftKeys, RightKeys: jq.RightKeys, Range: jq.Range, Columns: jq.Columns(schemas)}
	if jq.Outer() {
		// The join as written, checked by Spark's rules for its type (the
		// analyzed plan's), then the WHERE pushed below it
		// (join/pushdown.go): the join that runs may be a narrower type.
		declared := flow.New("query").Join(sides[0], sides[1], on)
		pd, nonANSI, err := joinPushdown(cfg, jq, schemas, declared)
		if err != nil {
			return nil, err
		}
		for i, e := range pd.Sides {
			if e != nil {
				sides[i].WhereWith(e, filter.Options{NonANSI: nonANSI})
			}
		}
		on.Type = pd.Type
		fq := flow.New("query").Join(sides[0], sides[1], on)
		if err := joinOuter(cfg, jq, schemas, fq, pd.Above()); err != nil {
			return nil, err
		}
		return fq, nil
	}
	fq := flow.New("query").Join(sides[0], sides[1], on)
	cols, err := joinSelect(jq, schemas)
	if err != nil {
		return nil, err
	}
	if cols != nil {
		fq.Select(cols...)
	}
	return fq, nil
}

// joinSelect is the SELECT list over the join's rows: each item's column
// by the name the join gives it (a name both sides have is alias_name),
// output under its alias, else its own name unless two items would share
// it. nil: SELECT *, the join's rows as they are.
func joinSelect(jq *query.JoinQuery, schemas [2]stream.Schema) ([]flow.Column, error) {
	if jq.Star {
		return nil, nil
	}
	ref := func(i int) string { return jq.Rels[i].Ref() }
	// joinName is the name in the join's rows of a column they carry.
	joinName := func(side int, col string) string {
		n, _ := jq.OutputName(schemas, side, col)
		return n
	}
	type sel struct{ in, out string }
	var sels []sel
	for _, it := range jq.Items {
		side := it.Side
		if it.All {
			if side == stream.RightSide && jq.Type == join.LeftSemi {
				return nil, errcode.New(errcode.UnresolvedColumn, "", "select the left relation's columns", "a left semi join outputs only %s's columns", ref(0))
			}
			for _, f := range schemas[side].Fields {
				sels = append(sels, sel{joinName(side, f.Name), f.Name})
			}
			continue
		}
		if side < 0 {
			in0, in1 := schemas[0].Field(it.Col) != nil, schemas[1].Field(it.Col) != nil && jq.Type != join.LeftSemi
			switch {
			case in0 && in1:
				return nil, errcode.New(codeAmbiguousReference, "", "qualify it: "+ref(0)+"."+it.Col+" or "+ref(1)+"."+it.Col,
					"reference %s is ambiguous: both relations of the join have it", it.Col)
			case in0:
				side = 0
			case in1:
				side = 1
			}
		}
		if side < 0 || schemas[side].Field(it.Col) == nil || side == stream.RightSide && jq.Type == join.LeftSemi {
			return nil, errcode.New(errcode.UnresolvedColumn, "", "select a column of the join's relations",
				"column %s is not a column of the join's output", it.Col)
		}
		out := it.As
		if out == "" {
			out = it.Col
		}
		sels = append(sels, sel{joinName(side, it.Col), out})
	}
	seen := map[string]int{}
	for _, s := range sels {
		seen[s.out]++
	}
	cols := make([]flow.Column, len(sels))
	for i, s := range sels {
		out := s.out
		if seen[out] > 1 {
			out = s.in
		}
		cols[i] = flow.Col(s.in)
		if out != s.in {
			cols[i] = cols[i].As(out)
		}
	}
	return cols, nil
}

// joinSink is the sink of a join query: --sink's file sink, or the Delta
// table appended to, created with the query's output schema.
func joinSink(cfg Config, fq *flow.Query, logger *slog.Logger) (stream.Sink, error) {
	_, table, fs, err := Locations(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Sink != "" {
		spec, err := ParseSinkSpec(cfg.Sink)
		if err != nil {
			return nil, err
		}
		return newFileSink(spec, "append", fs, cfg.Conf)
	}
	schema, err := fq.Schema()
	if err != nil {
		return nil, err
	}
	return delta.NewMergeSink(delta.SinkOptions{Path: table, Logger: logger, FS: fs, Schema: schema,
		TableProperties: cfg.TableProperties, OutputMode: "append"})
}

// codeAmbiguousReference is Spark's error class for a column name that
// several relations have.
const codeAmbiguousReference = "AMBIGUOUS_REFERENCE"

// isJoinQuery reports whether cfg runs a stream-stream join.
func isJoinQuery(cfg Config) bool { return cfg.Query != "" && query.IsJoin(cfg.Query) }

// buildJoinQuery is Build for a join query.
func buildJoinQuery(cfg Config, logger *slog.Logger) (engine.Query, engine.Options, error) {
	fq, err := buildJoin(cfg, logger)
	if err != nil {
		return engine.Query{}, engine.Options{}, err
	}
	ckpt, _, fs, err := Locations(cfg)
	if err != nil {
		return engine.Query{}, engine.Options{}, err
	}
	if cfg.Sink != "" || cfg.Table != "" {
		sink, err := joinSink(cfg, fq, logger)
		if err != nil {
			return engine.Query{}, engine.Options{}, err
		}
		fq.WriteTo(sink)
	}
	fq.SinkShared(cfg.TableShared).Trigger(cfg.Trigger).MaxBatches(cfg.MaxBatches).Confs(cfg.Conf)
	q, err := fq.Build()
	if err != nil {
		return q, engine.Options{}, err
	}
	return q, runOptions(cfg, ckpt, fs, logger), nil
}
