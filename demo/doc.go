// Package demo is ethstream's reference application: it runs the seeds' lifecycle
// (backfill, add a live source, retire the archive, refused reuse, shrink the
// state) on one checkpoint and one Delta table, then proves each claim from the
// query's own records and the table (DESIGN.md §12), and draws the charts.
package demo
