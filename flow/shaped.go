package flow

import (
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// OperatorShaped appends a stateful operator built elsewhere (the SQL
// compiler's, after a join) whose query-shape entry the caller knows:
// unlike Operator, the query keeps deriving its shape, with s as the
// operator's entry and the stateless steps since the operator before it as
// its input. Its rows' schema is the one it declares
// (stream.SchemaOperator), else unknown.
func (q *Query) OperatorShaped(op stream.Operator, s shape.Operator) *Query {
	if op == nil {
		return q.fail(invalid("nil operator"))
	}
	q.known = false
	if so, ok := op.(stream.SchemaOperator); ok {
		q.schema, q.known = so.OutputSchema(), true
	}
	s.Input = append([]string{}, q.input...)
	if s.Aggregates == nil {
		s.Aggregates = []string{}
	}
	if s.Keys == nil {
		s.Keys = []string{}
	}
	q.ops = append(q.ops, s)
	q.input = nil
	q.q.Stages = append(q.q.Stages, engine.Stage{Operator: op})
	return q
}
