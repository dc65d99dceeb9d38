// Package filter is the row filter that runs before a stateful operator: a
// WHERE predicate over the columns of a stream.Batch (comparisons, AND, OR,
// NOT, IN, IS NULL) with SQL's three-valued logic, compiled and evaluated
// (Predicate, a stream.Predicate). The engine runs it in its read path
// (engine.Query.Where), so nothing wraps a source or an operator. It
// imports only package stream and knows no domain.
//
// A row is kept when the predicate is TRUE; FALSE and UNKNOWN (a comparison
// with a null) drop it, as a WHERE clause does. Retractions (Batch.Signs)
// are filtered like insertions, so a retraction reaches the operator exactly
// when the row it takes back did (the predicate is a pure function of the
// row's values).
package filter
