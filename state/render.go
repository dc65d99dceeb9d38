package state

import "sync"

// ValueRenderer turns the value fields of one stored row of an operator's
// state into the values Dump and DumpSource print (the same fields, in
// the same types), for an operator whose value field holds an encoding of
// its own (a stream-stream join's binary rows). schema is the state
// version's recorded schema. It may return val changed in place.
type ValueRenderer func(schema Schema, key, val []any) ([]any, error)

var renderers struct {
	sync.Mutex
	byOperator map[string]ValueRenderer
}

// RegisterValueRenderer makes r render the values of every operator whose
// recorded state schema has operatorName. Call it from an init function of
// the operator's package. Registering a name twice panics.
func RegisterValueRenderer(operatorName string, r ValueRenderer) {
	renderers.Lock()
	defer renderers.Unlock()
	if renderers.byOperator == nil {
		renderers.byOperator = map[string]ValueRenderer{}
	}
	if _, dup := renderers.byOperator[operatorName]; dup {
		panic("state: value renderer of operator " + operatorName + " registered twice")
	}
	renderers.byOperator[operatorName] = r
}

// renderValues returns fn with the operator's registered renderer applied
// to each row's values (fn itself when none is registered).
func renderValues(schema Schema, fn func(p int, key, val []any) error) func(p int, key, val []any) error {
	renderers.Lock()
	r := renderers.byOperator[schema.OperatorName]
	renderers.Unlock()
	if r == nil {
		return fn
	}
	return func(p int, key, val []any) error {
		val, err := r(schema, key, val)
		if err != nil {
			return err
		}
		return fn(p, key, val)
	}
}
