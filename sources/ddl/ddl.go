// Package ddl parses a table schema written in Spark's DDL form, the form of
// DataStreamReader.schema(String) and of a file source's schema= option:
//
//	order_id STRING, amount DECIMAL(10,2), `event time` TIMESTAMP NOT NULL COMMENT 'when'
//
// as Spark's StructType.fromDDL accepts it: comma-separated columns, each a
// name (an identifier or a backquoted name, “ doubling a backquote), a
// data type, and optionally NOT NULL and COMMENT 'text'. Keywords and type
// names are case-insensitive. Types: BOOLEAN, TINYINT|BYTE, SMALLINT|SHORT,
// INT|INTEGER, BIGINT|LONG, FLOAT|REAL, DOUBLE, DECIMAL|DEC|NUMERIC
// [(p[,s])] (default 10,0, p 1..38, s 0..p), STRING, VARCHAR(n), CHAR(n),
// BINARY, DATE, TIMESTAMP, TIMESTAMP_LTZ, TIMESTAMP_NTZ, ARRAY<t>,
// MAP<k,v>, STRUCT<name[:] t [NOT NULL] [COMMENT 's'], ...>. A name
// repeated (case-insensitively, Spark's default) is refused.
//
// The parse result is Spark's view of the schema (Type.String renders
// Spark's simpleString); Schema.Stream maps it to the engine's column types
// (stream.Type), refusing the types the engine has no column for.
package ddl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Error codes: Spark's error classes.
const (
	// ParseSyntaxError: the text is not a DDL schema.
	ParseSyntaxError = "PARSE_SYNTAX_ERROR"
	// UnsupportedDatatype: a type name Spark does not know.
	UnsupportedDatatype = "UNSUPPORTED_DATATYPE"
	// UnsupportedForSource: a type Spark knows and this engine has no
	// column for yet (Spark's UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE).
	UnsupportedForSource = "UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE"
	// DuplicateColumn: a column name given twice (Spark's
	// COLUMN_ALREADY_EXISTS).
	DuplicateColumn = "COLUMN_ALREADY_EXISTS"
)

// Kind is a Spark data type's kind.
type Kind uint8

// Kinds, in Spark's names.
const (
	Boolean Kind = iota + 1
	Byte
	Short
	Int
	Long
	Float
	Double
	Decimal
	String
	Varchar
	Char
	Binary
	Date
	Timestamp
	TimestampNTZ
	Array
	Map
	Struct
)

var kindNames = map[Kind]string{Boolean: "boolean", Byte: "tinyint", Short: "smallint", Int: "int", Long: "bigint",
	Float: "float", Double: "double", Decimal: "decimal", String: "string", Varchar: "varchar", Char: "char",
	Binary: "binary", Date: "date", Timestamp: "timestamp", TimestampNTZ: "timestamp_ntz", Array: "array",
	Map: "map", Struct: "struct"}

// Type is a Spark data type.
type Type struct {
	Kind Kind
	// Precision and Scale of a Decimal; Length of a Varchar or Char.
	Precision, Scale, Length int
	// Elem is an Array's element type, or a Map's value type; Key is a Map's key type.
	Elem, Key *Type
	// Fields of a Struct.
	Fields []Field
}

// String renders Spark's simpleString, e.g. "decimal(10,2)", "array<int>".
func (t Type) String() string {
	switch t.Kind {
	case Decimal:
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale)
	case Varchar, Char:
		return fmt.Sprintf("%s(%d)", kindNames[t.Kind], t.Length)
	case Array, Map:
		if t.Elem == nil || t.Kind == Map && t.Key == nil {
			return kindNames[t.Kind] // an inferred kind whose parts are not known
		}
		if t.Kind == Array {
			return "array<" + t.Elem.String() + ">"
		}
		return "map<" + t.Key.String() + "," + t.Elem.String() + ">"
	case Struct:
		var b strings.Builder
		b.WriteString("struct<")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(f.Name + ":" + f.Type.String())
		}
		b.WriteByte('>')
		return b.String()
	}
	return kindNames[t.Kind]
}

// Field is one column.
type Field struct {
	Name     string
	Type     Type
	Nullable bool
	Comment  string
}

// Schema is a parsed DDL schema: its columns in order.
type Schema struct {
	Fields []Field
}

// String renders the schema back in DDL form, names backquoted: a
// parse of the result gives the same schema.
func (s Schema) String() string {
	var b strings.Builder
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.ddl(" "))
	}
	return b.String()
}

// ddl renders a column in DDL form: its quoted name, sep, its type,
// NOT NULL, its comment.
func (f Field) ddl(sep string) string {
	out := quote(f.Name) + sep + f.Type.ddl()
	if !f.Nullable {
		out += " NOT NULL"
	}
	if f.Comment != "" {
		out += " COMMENT '" + strings.ReplaceAll(strings.ReplaceAll(f.Comment, `\`, `\\`), "'", `\'`) + "'"
	}
	return out
}

// ddl renders a type in DDL form, type names in capitals.
func (t Type) ddl() string {
	switch t.Kind {
	case Array:
		return "ARRAY<" + t.Elem.ddl() + ">"
	case Map:
		return "MAP<" + t.Key.ddl() + ", " + t.Elem.ddl() + ">"
	case Struct:
		var b strings.Builder
		b.WriteString("STRUCT<")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.ddl(": "))
		}
		b.WriteByte('>')
		return b.String()
	}
	return strings.ToUpper(t.String())
}

func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// StreamType maps a Spark type to the engine's column type of the same
// type: boolean, tinyint, smallint, int, bigint, float, double,
// decimal(p,s), string (and varchar and char, as Spark reads them),
// binary, date, timestamp, timestamp_ntz. ok is false for a type the
// engine has no column for (arrays, maps and structs in a source).
func StreamType(t Type) (stream.Type, bool) {
	switch t.Kind {
	case Boolean:
		return stream.Boolean, true
	case Byte:
		return stream.Int8, true
	case Short:
		return stream.Int16, true
	case Int:
		return stream.Int32, true
	case Long:
		return stream.Int64, true
	case Float:
		return stream.Float32, true
	case Double:
		return stream.Float64, true
	case Decimal:
		return stream.DecimalOf(t.Precision, t.Scale), true
	case String, Varchar, Char:
		return stream.String, true
	case Binary:
		return stream.Binary, true
	case Date:
		return stream.Date, true
	case Timestamp:
		return stream.Timestamp, true
	case TimestampNTZ:
		return stream.TimestampNTZ, true
	case Array:
		// An array of a scalar type; an array of arrays, maps or structs
		// has no engine column.
		if t.Elem != nil && t.Elem.Kind != Array {
			if e, ok := StreamType(*t.Elem); ok {
				return stream.ArrayOf(e), true
			}
		}
	}
	return 0, false
}

// FromStream is the Spark type of an engine column type (the inverse of
// StreamType; an array's element likewise).
func FromStream(t stream.Type) Type {
	switch t.Kind() {
	case stream.Decimal:
		return Type{Kind: Decimal, Precision: t.Precision(), Scale: t.Scale()}
	case stream.Array:
		e := FromStream(t.Elem())
		return Type{Kind: Array, Elem: &e}
	}
	k := map[stream.Type]Kind{stream.Boolean: Boolean, stream.Int8: Byte, stream.Int16: Short, stream.Int32: Int,
		stream.Int64: Long, stream.Float32: Float, stream.Float64: Double, stream.String: String, stream.Binary: Binary,
		stream.Date: Date, stream.Timestamp: Timestamp, stream.TimestampNTZ: TimestampNTZ}[t]
	return Type{Kind: k}
}

// Stream maps the schema to the engine's: every column's StreamType, or an
// UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE error naming the first column whose
// type has no engine column (format names the source, e.g. "parquet").
func (s Schema) Stream(format string) (stream.Schema, error) {
	out := stream.Schema{Fields: make([]stream.Field, 0, len(s.Fields))}
	for _, f := range s.Fields {
		st, ok := StreamType(f.Type)
		if !ok {
			return stream.Schema{}, errcode.New(UnsupportedForSource, "",
				"declare the column with a scalar type (STRING, BIGINT, DECIMAL(p,s), DATE, ...), or leave it out of the schema (arrays, maps and structs are not supported in a source yet)",
				"the %s source does not support the column %s of the type %s", format, quote(f.Name), strings.ToUpper(f.Type.String()))
		}
		out.Fields = append(out.Fields, stream.Field{Name: f.Name, Type: st, Nullable: f.Nullable})
	}
	return out, nil
}

// Field returns the column named name (case-insensitively, as Spark
// resolves names by default), or nil.
func (s *Schema) Field(name string) *Field {
	for i := range s.Fields {
		if strings.EqualFold(s.Fields[i].Name, name) {
			return &s.Fields[i]
		}
	}
	return nil
}

const remedy = "write the schema as Spark's DDL: name TYPE[, name TYPE ...], e.g. order_id STRING, amount DOUBLE, event_time TIMESTAMP"

// Parse parses a DDL schema. An error is PARSE_SYNTAX_ERROR (with the
// offending position), UNSUPPORTED_DATATYPE or COLUMN_ALREADY_EXISTS.
func Parse(text string) (Schema, error) {
	p := &parser{src: text}
	p.next()
	fields, err := p.fields(tokEOF, false)
	if err != nil {
		return Schema{}, err
	}
	if len(fields) == 0 {
		return Schema{}, p.syntax("a column")
	}
	return Schema{Fields: fields}, nil
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokIdent
	tokQuoted // `name`
	tokString // 'text' or "text"
	tokNumber
	tokPunct // , ( ) < > :
	tokBad
)

type token struct {
	kind tokKind
	text string // identifier (as written), unquoted name or string, digits, punctuation
	pos  int
}

type parser struct {
	src string
	pos int
	tok token
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// next reads the next token into p.tok.
func (p *parser) next() {
	for p.pos < len(p.src) && strings.IndexByte(" \t\r\n", p.src[p.pos]) >= 0 {
		p.pos++
	}
	start := p.pos
	if p.pos >= len(p.src) {
		p.tok = token{kind: tokEOF, pos: start}
		return
	}
	c := p.src[p.pos]
	switch {
	case c == '`':
		var b strings.Builder
		for p.pos++; p.pos < len(p.src); p.pos++ {
			if p.src[p.pos] == '`' {
				if p.pos+1 < len(p.src) && p.src[p.pos+1] == '`' {
					b.WriteByte('`')
					p.pos++
					continue
				}
				p.pos++
				p.tok = token{kind: tokQuoted, text: b.String(), pos: start}
				return
			}
			b.WriteByte(p.src[p.pos])
		}
		p.tok = token{kind: tokBad, text: "unterminated `", pos: start}
	case c == '\'' || c == '"':
		var b strings.Builder
		for p.pos++; p.pos < len(p.src); p.pos++ {
			switch p.src[p.pos] {
			case '\\':
				if p.pos+1 < len(p.src) {
					p.pos++
					b.WriteByte(p.src[p.pos])
				}
				continue
			case c:
				p.pos++
				p.tok = token{kind: tokString, text: b.String(), pos: start}
				return
			}
			b.WriteByte(p.src[p.pos])
		}
		p.tok = token{kind: tokBad, text: "unterminated string", pos: start}
	case c >= '0' && c <= '9':
		for p.pos < len(p.src) && isIdentByte(p.src[p.pos]) {
			p.pos++
		}
		text := p.src[start:p.pos]
		kind := tokNumber
		for i := 0; i < len(text); i++ {
			if text[i] < '0' || text[i] > '9' {
				kind = tokIdent // Spark identifiers may start with a digit
			}
		}
		p.tok = token{kind: kind, text: text, pos: start}
	case isIdentByte(c):
		for p.pos < len(p.src) && isIdentByte(p.src[p.pos]) {
			p.pos++
		}
		p.tok = token{kind: tokIdent, text: p.src[start:p.pos], pos: start}
	case strings.IndexByte(",()<>:", c) >= 0:
		p.pos++
		p.tok = token{kind: tokPunct, text: string(c), pos: start}
	default:
		p.pos++
		p.tok = token{kind: tokBad, text: string(c), pos: start}
	}
}

func (p *parser) syntax(want string) error {
	near := "end of input"
	if p.tok.kind != tokEOF {
		near = strconv.Quote(p.src[p.tok.pos:min(len(p.src), p.tok.pos+20)])
	}
	return errcode.New(ParseSyntaxError, "", remedy, "syntax error in schema at position %d, near %s: expected %s", p.tok.pos, near, want)
}

func (p *parser) punct(s string) bool { return p.tok.kind == tokPunct && p.tok.text == s }

func (p *parser) keyword(k string) bool {
	return p.tok.kind == tokIdent && strings.EqualFold(p.tok.text, k)
}

func (p *parser) expect(s string) error {
	if !p.punct(s) {
		return p.syntax("'" + s + "'")
	}
	p.next()
	return nil
}

// fields parses "field, field, ..." up to end (EOF, or '>' inside a
// struct); inStruct allows the "name: type" colon.
func (p *parser) fields(end tokKind, inStruct bool) ([]Field, error) {
	var out []Field
	seen := map[string]bool{}
	atEnd := func() bool {
		if inStruct {
			return p.punct(">")
		}
		return p.tok.kind == end
	}
	if atEnd() {
		return nil, nil
	}
	for {
		var f Field
		switch p.tok.kind {
		case tokIdent, tokQuoted:
			f.Name = p.tok.text
		default:
			return nil, p.syntax("a column name")
		}
		p.next()
		if inStruct && p.punct(":") {
			p.next()
		}
		t, err := p.dataType()
		if err != nil {
			return nil, err
		}
		f.Type, f.Nullable = t, true
		for {
			if p.keyword("NOT") {
				p.next()
				if !p.keyword("NULL") {
					return nil, p.syntax("NULL after NOT")
				}
				p.next()
				f.Nullable = false
				continue
			}
			if p.keyword("COMMENT") {
				p.next()
				if p.tok.kind != tokString {
					return nil, p.syntax("a quoted comment")
				}
				f.Comment = p.tok.text
				p.next()
				continue
			}
			break
		}
		low := strings.ToLower(f.Name)
		if seen[low] {
			return nil, errcode.New(DuplicateColumn, "", "give every column its own name",
				"the column %s already exists in the schema", quote(f.Name))
		}
		seen[low] = true
		out = append(out, f)
		if atEnd() {
			return out, nil
		}
		if !p.punct(",") {
			if inStruct {
				return nil, p.syntax("',' or '>'")
			}
			return nil, p.syntax("',' or the end of the schema")
		}
		p.next()
	}
}

// intArg parses a non-negative integer argument.
func (p *parser) intArg() (int, error) {
	if p.tok.kind != tokNumber {
		return 0, p.syntax("a number")
	}
	n, err := strconv.Atoi(p.tok.text)
	if err != nil || n > 1<<20 {
		return 0, p.syntax("a small number")
	}
	p.next()
	return n, nil
}

func (p *parser) dataType() (Type, error) {
	if p.tok.kind != tokIdent {
		return Type{}, p.syntax("a data type")
	}
	name := strings.ToLower(p.tok.text)
	pos := p.tok.pos
	p.next()
	simple := map[string]Kind{"boolean": Boolean, "tinyint": Byte, "byte": Byte, "smallint": Short, "short": Short,
		"int": Int, "integer": Int, "bigint": Long, "long": Long, "float": Float, "real": Float, "double": Double,
		"string": String, "binary": Binary, "date": Date, "timestamp": Timestamp, "timestamp_ltz": Timestamp,
		"timestamp_ntz": TimestampNTZ}
	if k, ok := simple[name]; ok {
		return Type{Kind: k}, nil
	}
	switch name {
	case "decimal", "dec", "numeric":
		t := Type{Kind: Decimal, Precision: 10}
		if p.punct("(") {
			p.next()
			var err error
			if t.Precision, err = p.intArg(); err != nil {
				return Type{}, err
			}
			t.Scale = 0
			if p.punct(",") {
				p.next()
				if t.Scale, err = p.intArg(); err != nil {
					return Type{}, err
				}
			}
			if err := p.expect(")"); err != nil {
				return Type{}, err
			}
		}
		if t.Precision < 1 || t.Precision > 38 || t.Scale > t.Precision {
			return Type{}, errcode.New(ParseSyntaxError, "", "use DECIMAL(p,s) with 1 <= p <= 38 and 0 <= s <= p",
				"decimal(%d,%d) is out of range: precision must be 1 to 38 and scale 0 to the precision", t.Precision, t.Scale)
		}
		return t, nil
	case "varchar", "char":
		t := Type{Kind: Varchar}
		if name == "char" {
			t.Kind = Char
		}
		if !p.punct("(") {
			return Type{}, p.syntax("(length) after " + strings.ToUpper(name))
		}
		p.next()
		var err error
		if t.Length, err = p.intArg(); err != nil {
			return Type{}, err
		}
		if err := p.expect(")"); err != nil {
			return Type{}, err
		}
		return t, nil
	case "array":
		if err := p.expect("<"); err != nil {
			return Type{}, err
		}
		e, err := p.dataType()
		if err != nil {
			return Type{}, err
		}
		if err := p.expect(">"); err != nil {
			return Type{}, err
		}
		return Type{Kind: Array, Elem: &e}, nil
	case "map":
		if err := p.expect("<"); err != nil {
			return Type{}, err
		}
		k, err := p.dataType()
		if err != nil {
			return Type{}, err
		}
		if err := p.expect(","); err != nil {
			return Type{}, err
		}
		v, err := p.dataType()
		if err != nil {
			return Type{}, err
		}
		if err := p.expect(">"); err != nil {
			return Type{}, err
		}
		return Type{Kind: Map, Key: &k, Elem: &v}, nil
	case "struct":
		if err := p.expect("<"); err != nil {
			return Type{}, err
		}
		fs, err := p.fields(tokPunct, true)
		if err != nil {
			return Type{}, err
		}
		if err := p.expect(">"); err != nil {
			return Type{}, err
		}
		return Type{Kind: Struct, Fields: fs}, nil
	}
	return Type{}, errcode.New(UnsupportedDatatype, "", remedy, "unsupported data type %q at position %d", strings.ToUpper(name), pos)
}
