package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Schema is a Spark StructType, as stored in metaData.schemaString.
type Schema struct {
	Fields []Field
}

// Field is one StructField.
type Field struct {
	Name     string
	Type     DataType
	Nullable bool
	Metadata map[string]any
}

// DataType is a Spark data type: a primitive name (string, long, integer,
// short, byte, float, double, boolean, binary, date, timestamp,
// timestamp_ntz, decimal(p,s)) or one of struct, array, map.
type DataType struct {
	Primitive         string    // set for primitives
	Struct            *Schema   // set for struct
	Element           *DataType // set for array
	ContainsNull      bool      // array
	Key, Value        *DataType // set for map
	ValueContainsNull bool      // map
}

// Kind names the type: the primitive name, or "struct", "array", "map".
func (t DataType) Kind() string {
	switch {
	case t.Struct != nil:
		return "struct"
	case t.Element != nil:
		return "array"
	case t.Key != nil:
		return "map"
	}
	return t.Primitive
}

// ParseSchema parses a schemaString.
func ParseSchema(s string) (Schema, error) {
	var raw json.RawMessage = []byte(s)
	t, err := parseType(raw, 0)
	if err != nil {
		return Schema{}, err
	}
	if t.Struct == nil {
		return Schema{}, fmt.Errorf("schema is %q, want a struct", t.Kind())
	}
	return *t.Struct, nil
}

const maxTypeDepth = 64

func parseType(raw json.RawMessage, depth int) (DataType, error) {
	if depth > maxTypeDepth {
		return DataType{}, fmt.Errorf("type nested deeper than %d", maxTypeDepth)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return DataType{}, err
		}
		if name == "" {
			return DataType{}, fmt.Errorf("empty type name")
		}
		return DataType{Primitive: name}, nil
	}
	var obj struct {
		Type              string            `json:"type"`
		Fields            []json.RawMessage `json:"fields"`
		ElementType       json.RawMessage   `json:"elementType"`
		ContainsNull      bool              `json:"containsNull"`
		KeyType           json.RawMessage   `json:"keyType"`
		ValueType         json.RawMessage   `json:"valueType"`
		ValueContainsNull bool              `json:"valueContainsNull"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return DataType{}, fmt.Errorf("parse type: %w", err)
	}
	switch obj.Type {
	case "struct":
		st := &Schema{}
		seen := map[string]bool{}
		for _, fr := range obj.Fields {
			var f struct {
				Name     string          `json:"name"`
				Type     json.RawMessage `json:"type"`
				Nullable bool            `json:"nullable"`
				Metadata map[string]any  `json:"metadata"`
			}
			if err := json.Unmarshal(fr, &f); err != nil {
				return DataType{}, fmt.Errorf("parse field: %w", err)
			}
			if f.Name == "" {
				return DataType{}, fmt.Errorf("field without a name")
			}
			if seen[strings.ToLower(f.Name)] {
				return DataType{}, fmt.Errorf("duplicate field %q", f.Name)
			}
			seen[strings.ToLower(f.Name)] = true
			ft, err := parseType(f.Type, depth+1)
			if err != nil {
				return DataType{}, fmt.Errorf("field %q: %w", f.Name, err)
			}
			st.Fields = append(st.Fields, Field{Name: f.Name, Type: ft, Nullable: f.Nullable, Metadata: f.Metadata})
		}
		return DataType{Struct: st}, nil
	case "array":
		et, err := parseType(obj.ElementType, depth+1)
		if err != nil {
			return DataType{}, fmt.Errorf("array element: %w", err)
		}
		return DataType{Element: &et, ContainsNull: obj.ContainsNull}, nil
	case "map":
		kt, err := parseType(obj.KeyType, depth+1)
		if err != nil {
			return DataType{}, fmt.Errorf("map key: %w", err)
		}
		vt, err := parseType(obj.ValueType, depth+1)
		if err != nil {
			return DataType{}, fmt.Errorf("map value: %w", err)
		}
		return DataType{Key: &kt, Value: &vt, ValueContainsNull: obj.ValueContainsNull}, nil
	}
	return DataType{}, fmt.Errorf("unknown complex type %q", obj.Type)
}

// String renders the schema as Spark's schemaString JSON.
func (s Schema) String() string {
	var b bytes.Buffer
	writeStruct(&b, s)
	return b.String()
}

func writeStruct(b *bytes.Buffer, s Schema) {
	b.WriteString(`{"type":"struct","fields":[`)
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(f.Name)
		b.WriteString(`{"name":`)
		b.Write(name)
		b.WriteString(`,"type":`)
		writeType(b, f.Type)
		fmt.Fprintf(b, `,"nullable":%t,"metadata":`, f.Nullable)
		if len(f.Metadata) == 0 {
			b.WriteString("{}")
		} else {
			md, _ := json.Marshal(f.Metadata)
			b.Write(md)
		}
		b.WriteByte('}')
	}
	b.WriteString("]}")
}

func writeType(b *bytes.Buffer, t DataType) {
	switch {
	case t.Struct != nil:
		writeStruct(b, *t.Struct)
	case t.Element != nil:
		b.WriteString(`{"type":"array","elementType":`)
		writeType(b, *t.Element)
		fmt.Fprintf(b, `,"containsNull":%t}`, t.ContainsNull)
	case t.Key != nil:
		b.WriteString(`{"type":"map","keyType":`)
		writeType(b, *t.Key)
		b.WriteString(`,"valueType":`)
		writeType(b, *t.Value)
		fmt.Fprintf(b, `,"valueContainsNull":%t}`, t.ValueContainsNull)
	default:
		name, _ := json.Marshal(t.Primitive)
		b.Write(name)
	}
}

// Field returns the top-level field with the given name.
func (s Schema) Field(name string) (Field, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// String renders a type as schemaString JSON.
func (t DataType) String() string {
	var b bytes.Buffer
	writeType(&b, t)
	return b.String()
}
