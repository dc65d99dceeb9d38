package columnar

import (
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"
)

// Field is one column a reader wants from a Parquet file: where it is and
// what engine type it decodes to (rules.go says how each physical type and
// annotation converts).
type Field struct {
	Name string   // the engine column's name
	Path []string // the file's leaf; nil: Name (a top-level column)
	// Type is any scalar type (rules.go), or an ARRAY of one: then Path
	// names the list, not its leaf (list.go).
	Type stream.Type
	// Required: a file without the column is refused. Otherwise its rows
	// read as null (a column added later, or one another writer left out).
	Required bool
	// Intern: the strings of plain pages are interned in the table Open is
	// given (equal values become equal pointers, which a grouping compares
	// first); a dictionary's rows share its strings already.
	Intern bool
	// Parent: record which rows have the leaf's enclosing group present
	// (its definition level reached), for a reader that tells a null
	// struct from a struct of nulls (RowGroup.Parents).
	Parent bool
}

// leafPath is the field's path in the file.
func (f Field) leafPath() []string {
	if f.Path != nil {
		return f.Path
	}
	return []string{f.Name}
}

// File decodes a schema's fields from one Parquet file, one row group at a
// time. It is used by one goroutine.
type File struct {
	f    *parquet.File
	decs []*colDecoder
	pool *Pool // nil: every row group's columns are new
}

// UsePool makes the row groups decoded after it take their value slices
// from pool (Pool); it returns p.
func (p *File) UsePool(pool *Pool) *File {
	p.pool = pool
	return p
}

// Column is a field's leaf in the file.
type Column struct {
	Leaf int    // leaf column index; -1: the file lacks it (all null)
	Name string // the file's name of the leaf, dot-separated
}

// Open plans the decoding of fields from f. Top-level names are matched
// exactly, then case-insensitively as Spark resolves them. intern is the
// table of Field.Intern (nil: none).
func Open(f *parquet.File, fields []Field, intern map[string]string) (*File, error) {
	out := &File{f: f, decs: make([]*colDecoder, len(fields))}
	leaves := leafElements(f.Metadata())
	for i, fd := range fields {
		d := &colDecoder{name: fd.Name, arch: strings.Join(fd.leafPath(), "."), typ: fd.Type, arr: fd.Type, leaf: -1}
		if fd.Intern {
			d.intern = intern
		}
		if fd.Type.Kind() == stream.Array {
			d.typ = fd.Type.Elem()
			found, err := openList(f, d, fd.leafPath(), leaves)
			if err != nil {
				return nil, err
			}
			if !found && fd.Required {
				return nil, fmt.Errorf("required column %q is missing", d.arch)
			}
			out.decs[i] = d
			continue
		}
		lc, ok, err := lookup(f.Schema(), fd.leafPath())
		if err != nil {
			return nil, err
		}
		if !ok {
			if fd.Required {
				return nil, fmt.Errorf("required column %q is missing", d.arch)
			}
			out.decs[i] = d
			continue
		}
		if lc.MaxRepetitionLevel > 0 || lc.ColumnIndex >= len(leaves) || !leaves[lc.ColumnIndex].Type.Valid {
			return nil, fmt.Errorf("column %q is not a flat primitive column", d.arch)
		}
		el := leaves[lc.ColumnIndex]
		d.leaf, d.maxDef, d.phys = lc.ColumnIndex, lc.MaxDefinitionLevel, el.Type.V
		if IsDecimal(el) {
			d.scale = DecimalScale(el)
		}
		if !d.planType(el) {
			return nil, fmt.Errorf("column %q has physical type %s (%s), which cannot be read as %s", d.arch, d.phys, el.LogicalType.String(), fd.Type)
		}
		if fd.Parent && len(fd.leafPath()) > 1 {
			d.parent = []bool{}
			d.parentDef = d.maxDef
			if lc.Node.Optional() {
				d.parentDef-- // the leaf's own level
			}
		}
		out.decs[i] = d
	}
	return out, nil
}

// lookup finds the column at path: exactly, else with a case-insensitive
// top-level name. A column found that is a group is refused.
func lookup(s *parquet.Schema, path []string) (parquet.LeafColumn, bool, error) {
	lc, ok := s.Lookup(path...)
	if !ok {
		for _, f := range s.Fields() {
			if strings.EqualFold(f.Name(), path[0]) {
				if lc, ok = s.Lookup(append([]string{f.Name()}, path[1:]...)...); ok {
					break
				}
			}
		}
	}
	if !ok {
		if n := fieldNamed(s, path[0]); n != nil && !n.Leaf() && len(path) == 1 {
			return lc, false, fmt.Errorf("column %q is not a flat primitive column", path[0])
		}
		return lc, false, nil
	}
	return lc, true, nil
}

// fieldNamed is the top-level field named name (exactly, else
// case-insensitively), or nil.
func fieldNamed(s *parquet.Schema, name string) parquet.Field {
	var fold parquet.Field
	for _, f := range s.Fields() {
		if f.Name() == name {
			return f
		}
		if fold == nil && strings.EqualFold(f.Name(), name) {
			fold = f
		}
	}
	return fold
}

// leafElements are the schema elements of the file's leaves, by leaf index.
func leafElements(md *format.FileMetaData) []*format.SchemaElement {
	var out []*format.SchemaElement
	for i := 1; i < len(md.Schema); i++ {
		el := &md.Schema[i]
		if !el.NumChildren.Valid || el.NumChildren.V == 0 {
			out = append(out, el)
		}
	}
	return out
}

// Columns are the fields' leaves in the file, in field order.
func (p *File) Columns() []Column {
	out := make([]Column, len(p.decs))
	for i, d := range p.decs {
		out[i] = Column{Leaf: d.leaf, Name: d.arch}
	}
	return out
}

// RowGroup is one decoded row group: a batch with a column per field, in
// field order, and for a Field.Parent field the rows whose enclosing group
// is present (nil for other fields, or when the file lacks the leaf).
type RowGroup struct {
	Batch   *stream.Batch
	Parents [][]bool
}

// DecodeRowGroup decodes row group i.
func (p *File) DecodeRowGroup(g int) (RowGroup, error) {
	rg := p.f.RowGroups()[g]
	n := int(rg.NumRows())
	b := &stream.Batch{Len: n, Columns: make([]stream.Column, len(p.decs))}
	out := RowGroup{Batch: b}
	chunks := rg.ColumnChunks()
	for i, d := range p.decs {
		d.pool = p.pool
		b.Columns[i] = p.pool.column(d.name, d.arr, n)
		if d.leaf < 0 {
			b.Columns[i].Valid = make([]bool, n) // all null
			clear(b.Columns[i].Int64s)
			clear(b.Columns[i].Strings)
			continue
		}
		if d.parent != nil {
			d.parent = make([]bool, n)
			if d.parentDef == 0 {
				for r := range d.parent {
					d.parent[r] = true
				}
			}
			if out.Parents == nil {
				out.Parents = make([][]bool, len(p.decs))
			}
			out.Parents[i] = d.parent
		}
		if err := d.decodeChunk(chunks[d.leaf], &b.Columns[i], n); err != nil {
			return RowGroup{}, err
		}
	}
	return out, nil
}

// planType checks that the file's physical type can be read as d.typ and
// picks the conversion; false means it cannot. The pairs are Spark's
// vectorized reader's (integers widen, a FLOAT widens to DOUBLE, a
// DECIMAL to a DECIMAL of no less scale and integral digits), plus the
// engine's older reads (a DECIMAL of whole numbers as BIGINT, numbers as
// DOUBLE, a FIXED_LEN_BYTE_ARRAY hash as 0x-hex STRING).
func (d *colDecoder) planType(el *format.SchemaElement) bool {
	binary := d.phys == format.FixedLenByteArray || d.phys == format.ByteArray
	intPhys := d.phys == format.Int32 || d.phys == format.Int64
	switch d.typ.Kind() {
	case stream.Int64:
		switch d.phys {
		case format.Int32, format.Int64, format.Double:
			return true
		}
		return binary && IsDecimal(el)
	case stream.Int32, stream.Int16, stream.Int8:
		return d.phys == format.Int32 && !IsDecimal(el) && !isDate(el)
	case stream.Boolean:
		return d.phys == format.Boolean
	case stream.Date:
		return d.phys == format.Int32 && isDate(el)
	case stream.Float64:
		// Integer or decimal columns convert, as Spark's upcast does.
		switch d.phys {
		case format.Double, format.Float, format.Int32, format.Int64:
			return true
		}
		return binary && IsDecimal(el)
	case stream.Float32:
		return d.phys == format.Float
	case stream.Decimal:
		d.decimal = true
		if !IsDecimal(el) {
			// An integer column reads as a decimal of scale 0 that holds it.
			if !intPhys || isDate(el) {
				return false
			}
			d.scale = 0
			return d.typ.Precision()-d.typ.Scale() >= map[format.Type]int{format.Int32: 10, format.Int64: 20}[d.phys]
		}
		fp, fs := DecimalPrecision(el), int(d.scale)
		if fs > d.typ.Scale() || fp-fs > d.typ.Precision()-d.typ.Scale() {
			return false
		}
		d.rescale = d.typ.Scale() - fs
		return intPhys || binary
	case stream.Timestamp, stream.TimestampNTZ:
		var ok bool
		d.ts, ok = TimestampOf(el)
		return ok
	case stream.String:
		d.hexBin = d.phys == format.FixedLenByteArray
		return binary
	case stream.Binary:
		return binary
	}
	return false
}

// isDate reports whether a leaf is annotated DATE.
func isDate(el *format.SchemaElement) bool {
	if _, ok := el.LogicalType.Value.(*format.DateType); ok {
		return true
	}
	return el.ConvertedType.Valid && el.ConvertedType.V == deprecated.Date
}

// colDecoder turns the pages of one file column into an engine column.
// It is used by one goroutine (one file) at a time.
type colDecoder struct {
	name      string      // engine column name
	arch      string      // file column name (its path, dot-separated)
	typ       stream.Type // the values' type (a list's elements')
	arr       stream.Type // the column's type (typ, or an ARRAY of it)
	list      *listShape  // a list column's levels; nil for a scalar
	leaf      int         // leaf column index in the file, -1 when absent
	maxDef    int
	phys      format.Type
	scale     int32 // decimal scale of integer and double columns
	ts        Timestamp
	hexBin    bool // binary hashes rendered as 0x-hex
	decimal   bool // read as Decimals
	rescale   int  // decimal digits the engine's scale adds to the file's
	nBool     int  // values of the BOOLEAN page being converted (bit-packed)
	intern    map[string]string
	pool      *Pool  // the File's (nil: none)
	parent    []bool // Field.Parent: rows whose enclosing group is present
	parentDef int    // the definition level at which the enclosing group is present

	dict parquet.Dictionary // dictionary of dictInts/dictStrs/dictFlts
	// index: a scalar string column's dictionary indexes for its
	// stream.Dict view, while every page of the chunk read so far went
	// through one dictionary (nil: no view for this chunk).
	index    []int32
	dictInts []int64
	dictStrs []string
	dictFlts []float64
	dictDecs []stream.Dec128
	decs     []stream.Dec128
	ints     []int64 // scratch
	strs     []string
	flts     []float64
}

// toInts converts the values of a page (or dictionary) to int64s in dst.
func (d *colDecoder) toInts(v encoding.Values, dst []int64) ([]int64, error) {
	dst = dst[:0]
	switch d.phys {
	case format.Int32:
		for _, x := range v.Int32() {
			dst = append(dst, int64(x))
		}
	case format.Int64:
		dst = append(dst, v.Int64()...)
	case format.Double:
		for _, x := range v.Double() {
			if x != math.Trunc(x) || math.Abs(x) > 1<<62 {
				return nil, fmt.Errorf("column %q holds non-integer %v", d.arch, x)
			}
			dst = append(dst, int64(x))
		}
	case format.FixedLenByteArray:
		data, size := v.FixedLenByteArray()
		if size <= 0 {
			return dst, nil
		}
		for i := 0; i+size <= len(data); i += size {
			x, err := BigEndianInt(data[i : i+size])
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", d.arch, err)
			}
			dst = append(dst, x)
		}
	case format.ByteArray:
		data, offs := v.ByteArray()
		for i := 0; i+1 < len(offs); i++ {
			x, err := BigEndianInt(data[offs[i]:offs[i+1]])
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", d.arch, err)
			}
			dst = append(dst, x)
		}
	case format.Int96:
		for _, x := range v.Int96() {
			dst = append(dst, Int96Micros(x))
		}
	case format.Boolean:
		bits := v.Boolean()
		if len(bits)*8 < d.nBool {
			return nil, fmt.Errorf("column %q: boolean page has %d bytes for %d values", d.arch, len(bits), d.nBool)
		}
		for i := range d.nBool {
			dst = append(dst, int64(bits[i/8]>>(i%8)&1))
		}
	default:
		return nil, fmt.Errorf("column %q: unsupported physical type %s", d.arch, d.phys)
	}
	if (d.typ == stream.Timestamp || d.typ == stream.TimestampNTZ) && d.ts.Unit != Int96 && d.ts.Unit != Micros {
		for i, x := range dst {
			dst[i] = d.ts.Micros(x)
		}
	} else if d.scale > 0 {
		if d.scale >= int32(len(pow10)) {
			return nil, fmt.Errorf("column %q: decimal scale %d too large for an integer", d.arch, d.scale)
		}
		p := pow10[d.scale]
		for i, x := range dst {
			if x%p != 0 {
				return nil, fmt.Errorf("column %q holds a fractional decimal", d.arch)
			}
			dst[i] = x / p
		}
	}
	return dst, nil
}

// toDecs converts the values of a page (or dictionary) to the unscaled
// values of the engine's decimal type in dst: integers and big-endian
// two's complement (up to 16 significant bytes), times 10^rescale.
func (d *colDecoder) toDecs(v encoding.Values, dst []stream.Dec128) ([]stream.Dec128, error) {
	dst = dst[:0]
	switch d.phys {
	case format.Int32:
		for _, x := range v.Int32() {
			dst = append(dst, stream.Dec128Of(int64(x)))
		}
	case format.Int64:
		for _, x := range v.Int64() {
			dst = append(dst, stream.Dec128Of(x))
		}
	case format.FixedLenByteArray:
		data, size := v.FixedLenByteArray()
		if size <= 0 {
			return dst, nil
		}
		for i := 0; i+size <= len(data); i += size {
			x, err := BigEndianDec(data[i : i+size])
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", d.arch, err)
			}
			dst = append(dst, x)
		}
	case format.ByteArray:
		data, offs := v.ByteArray()
		for i := 0; i+1 < len(offs); i++ {
			x, err := BigEndianDec(data[offs[i]:offs[i+1]])
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", d.arch, err)
			}
			dst = append(dst, x)
		}
	default:
		return nil, fmt.Errorf("column %q: physical type %s holds no decimal", d.arch, d.phys)
	}
	if d.rescale > 0 {
		m := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.rescale)), nil)
		for i, x := range dst {
			dst[i], _ = stream.Dec128FromBig(new(big.Int).Mul(x.Big(), m)) // planType kept the digits within 38
		}
	}
	return dst, nil
}

// toFloats converts the values of a page (or dictionary) to float64s in
// dst: doubles as they are, integers and decimals to the nearest double.
func (d *colDecoder) toFloats(v encoding.Values, dst []float64) ([]float64, error) {
	dst = dst[:0]
	switch d.phys {
	case format.Double:
		dst = append(dst, v.Double()...)
		return dst, nil
	case format.Float:
		for _, x := range v.Float() {
			dst = append(dst, float64(x))
		}
		return dst, nil
	}
	saved := d.scale
	d.scale = 0 // the integers unscaled; the scale divides below
	ints, err := d.toInts(v, nil)
	d.scale = saved
	if err != nil {
		return nil, err
	}
	div := math.Pow10(int(d.scale))
	for _, x := range ints {
		dst = append(dst, float64(x)/div)
	}
	return dst, nil
}

// toStrs converts byte-array values to strings in dst: one allocation per
// page (or dictionary) that the strings share. The miner values of a plain
// page are interned (so that equal miners are equal pointers, which the
// aggregation compares first); a dictionary's are not: its rows share the
// dictionary's strings already, and interning them in a table carried from
// file to file cost a lookup per entry that missed the cache (a seed
// archive has ~20k miners): 18% of a file's decode.
func (d *colDecoder) toStrs(v encoding.Values, dst []string, dict bool) []string {
	dst = dst[:0]
	intern := d.intern != nil && !dict
	if d.phys == format.FixedLenByteArray {
		data, size := v.FixedLenByteArray()
		if size <= 0 {
			return dst
		}
		if cap(dst) == 0 {
			dst = make([]string, 0, len(data)/size) // a view's values: exactly its own
		}
		buf := make([]byte, 0, len(data)/size*(2+2*size))
		for i := 0; i+size <= len(data); i += size {
			buf = append(buf, '0', 'x')
			buf = hex.AppendEncode(buf, data[i:i+size])
		}
		all := string(buf)
		w := 2 + 2*size
		for i := 0; i+w <= len(all); i += w {
			s := all[i : i+w]
			if intern {
				s = d.internStr(s)
			}
			dst = append(dst, s)
		}
		return dst
	}
	data, offs := v.ByteArray()
	if len(offs) == 0 {
		return dst
	}
	if cap(dst) == 0 {
		dst = make([]string, 0, len(offs)-1)
	}
	if intern {
		for i := 0; i+1 < len(offs); i++ {
			b := data[offs[i]:offs[i+1]]
			s, ok := d.intern[string(b)]
			if !ok {
				s = string(b)
				d.intern[s] = s
			}
			dst = append(dst, s)
		}
		return dst
	}
	all := string(data[offs[0]:offs[len(offs)-1]])
	base := offs[0]
	for i := 0; i+1 < len(offs); i++ {
		dst = append(dst, all[offs[i]-base:offs[i+1]-base])
	}
	return dst
}

func (d *colDecoder) internStr(s string) string {
	if t, ok := d.intern[s]; ok {
		return t
	}
	d.intern[s] = s
	return s
}

// decodeChunk decodes the column chunk of one row group into col, which has
// room for n rows.
func (d *colDecoder) decodeChunk(chunk parquet.ColumnChunk, col *stream.Column, n int) error {
	pages := chunk.Pages()
	defer pages.Close()
	// Dictionaries belong to their chunk: never match a pointer from another.
	// (Their converted values are copied into the columns, so the slices
	// are reused; a string column's are not: its dictionary view hands
	// them out.)
	d.dict = nil
	pos := 0
	var st *listState
	if d.list != nil {
		st = &listState{row: -1, valid: make([]bool, n)}
	} else if d.typ.Storage() == stream.String {
		d.dictStrs = nil
		d.index = d.pool.index(n)
	}
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("column %q: read page: %w", d.arch, err)
		}
		if st != nil {
			err = d.decodeListPage(p, col, st, n)
		} else {
			err = d.decodePage(p, col, pos, n)
		}
		pos += int(p.NumRows())
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
	if st != nil {
		return d.finishList(col, st, n)
	}
	if pos != n {
		return fmt.Errorf("column %q holds %d values, row group has %d rows", d.arch, pos, n)
	}
	if d.index != nil {
		col.Dict = stream.NewDict(col.Strings, d.index, d.dictStrs)
		d.index = nil
	}
	return nil
}

// decodePage decodes one page into rows [pos, pos+NumRows) of col, which
// has n rows.
func (d *colDecoder) decodePage(p parquet.Page, col *stream.Column, pos, n int) error {
	rows := int(p.NumRows())
	if pos+rows > n {
		return fmt.Errorf("column %q holds more values than its row group's %d rows", d.arch, n)
	}
	defs := p.DefinitionLevels()
	if d.maxDef > 0 && len(defs) != rows {
		return fmt.Errorf("column %q: page has %d definition levels for %d rows", d.arch, len(defs), rows)
	}
	if d.parent != nil && d.parentDef > 0 {
		for i, l := range defs {
			d.parent[pos+i] = int(l) >= d.parentDef
		}
	}
	nonNull := rows
	if d.maxDef > 0 {
		nonNull = 0
		for _, l := range defs {
			if int(l) == d.maxDef {
				nonNull++
			}
		}
	}
	pg := page{p: p, defs: defs, pos: pos, rows: rows, nonNull: nonNull, n: n}
	d.nBool = nonNull
	switch {
	case d.decimal:
		return decodeValues(d, pg, col, col.Decimals, &d.dictDecs, &d.decs,
			func(v encoding.Values, dst []stream.Dec128, _ bool) ([]stream.Dec128, error) { return d.toDecs(v, dst) })
	case d.typ.Storage() == stream.String:
		return decodeValues(d, pg, col, col.Strings, &d.dictStrs, &d.strs,
			func(v encoding.Values, dst []string, dict bool) ([]string, error) { return d.toStrs(v, dst, dict), nil })
	case d.typ.Storage() == stream.Float64:
		return decodeValues(d, pg, col, col.Float64s, &d.dictFlts, &d.flts,
			func(v encoding.Values, dst []float64, _ bool) ([]float64, error) { return d.toFloats(v, dst) })
	default:
		return decodeValues(d, pg, col, col.Int64s, &d.dictInts, &d.ints,
			func(v encoding.Values, dst []int64, _ bool) ([]int64, error) { return d.toInts(v, dst) })
	}
}

// page is one data page of a column chunk and where its rows go.
type page struct {
	p       parquet.Page
	defs    []byte
	pos     int // first row of the page in the row group
	rows    int // rows of the page
	nonNull int // rows with a value
	n       int // rows of the row group
}

// decodeValues decodes the values of pg into vals (the column's value slice
// of its type), through the dictionary (converted once per dictionary into
// *dict) or the page's plain values (converted into *scratch), and spreads
// them over the non-null rows.
func decodeValues[T any](d *colDecoder, pg page, col *stream.Column, vals []T, dict, scratch *[]T,
	conv func(v encoding.Values, dst []T, dict bool) ([]T, error)) error {
	var err error
	dense := d.maxDef == 0 || pg.nonNull == pg.rows
	if pd := pg.p.Dictionary(); pd != nil {
		if pd != d.dict {
			if d.dict != nil {
				d.dropIndex() // a second dictionary: the view has one
			}
			d.dict = pd
			if *dict, err = conv(pd.Page().Data(), (*dict)[:0], true); err != nil {
				return err
			}
		}
		data := pg.p.Data()
		idx := data.Int32()
		if len(idx) != pg.nonNull {
			return fmt.Errorf("column %q: page has %d values, want %d", d.arch, len(idx), pg.nonNull)
		}
		if d.index != nil {
			d.pageIndex(pg, idx)
		}
		// Without nulls the values go straight into the column; with nulls
		// through the scratch slice, spread out below.
		dst := vals[pg.pos : pg.pos+pg.rows]
		if !dense {
			*scratch = slices.Grow((*scratch)[:0], pg.nonNull)[:pg.nonNull]
			dst = *scratch
		}
		for i, k := range idx {
			if k < 0 || int(k) >= len(*dict) {
				return fmt.Errorf("column %q: dictionary index %d out of range", d.arch, k)
			}
			dst[i] = (*dict)[k]
		}
		if dense {
			markValid(col, pg.pos, pg.rows)
			return nil
		}
	} else if d.dropIndex(); dense {
		// Converted in place: the capacity ends at the page's last row, so
		// a page with more values than rows converts into a new slice
		// and fails the count.
		got, err := conv(pg.p.Data(), vals[pg.pos:pg.pos:pg.pos+pg.rows], false)
		if err != nil {
			return err
		}
		if len(got) != pg.nonNull {
			return fmt.Errorf("column %q: page has %d values, want %d", d.arch, len(got), pg.nonNull)
		}
		markValid(col, pg.pos, pg.rows)
		return nil
	} else {
		if *scratch, err = conv(pg.p.Data(), *scratch, false); err != nil {
			return err
		}
		if len(*scratch) != pg.nonNull {
			return fmt.Errorf("column %q: page has %d values, want %d", d.arch, len(*scratch), pg.nonNull)
		}
	}
	if col.Valid == nil {
		col.Valid = make([]bool, pg.n)
		for i := range pg.pos {
			col.Valid[i] = true
		}
		// Rows after this page are marked as they are decoded.
	}
	k := 0
	var zero T
	for i, l := range pg.defs {
		if int(l) != d.maxDef {
			col.Valid[pg.pos+i] = false
			vals[pg.pos+i] = zero // a null's slot holds no value (a recycled slice held one: Pool)
			continue
		}
		col.Valid[pg.pos+i] = true
		vals[pg.pos+i] = (*scratch)[k]
		k++
	}
	return nil
}

// pageIndex records a dictionary page's indexes idx in d.index at the
// page's rows, -1 at its nulls.
func (d *colDecoder) pageIndex(pg page, idx []int32) {
	dst := d.index[pg.pos : pg.pos+pg.rows]
	if pg.nonNull == pg.rows {
		copy(dst, idx)
		return
	}
	k := 0
	for i, l := range pg.defs {
		if int(l) != d.maxDef {
			dst[i] = -1
			continue
		}
		dst[i] = idx[k]
		k++
	}
}

// dropIndex gives up the chunk's dictionary view (a page of plain values,
// a second dictionary).
func (d *colDecoder) dropIndex() {
	d.pool.putIndex(d.index)
	d.index = nil
}

// markValid marks rows [pos, pos+n) of col valid, if col tracks validity.
func markValid(col *stream.Column, pos, n int) {
	if col.Valid != nil {
		for i := pos; i < pos+n; i++ {
			col.Valid[i] = true
		}
	}
}
