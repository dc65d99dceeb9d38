package files

import (
	"errors"
	"strings"
)

var (
	errUnterminatedQuote = errors.New("unterminated quoted field")
	errAfterQuote        = errors.New("characters after a closing quote")
)

// splitCSV splits one CSV line (no line break) into its fields as Spark's
// CSV reader (univocity) does with multiLine=false: fields are separated
// by sep; a field that starts with quote is quoted, and inside it escape
// followed by quote or by escape stands for that character, and a doubled
// quote for one quote; a quoted field must end at sep or at the end of the
// line; in an unquoted field every character is literal. quote 0 turns
// quoting off. quoted[i] says whether field i was quoted (a quoted field
// is never the null value). fields and quoted reuse the given slices.
func splitCSV(line string, sep, quote, escape byte, fields []string, quoted []bool) ([]string, []bool, error) {
	fields, quoted = fields[:0], quoted[:0]
	var b strings.Builder
	i := 0
	for {
		if quote != 0 && i < len(line) && line[i] == quote {
			b.Reset()
			i++
			closed := false
			for i < len(line) {
				c := line[i]
				if escape != 0 && c == escape && escape != quote && i+1 < len(line) && (line[i+1] == quote || line[i+1] == escape) {
					b.WriteByte(line[i+1])
					i += 2
					continue
				}
				if c == quote {
					if i+1 < len(line) && line[i+1] == quote {
						b.WriteByte(quote)
						i += 2
						continue
					}
					i++
					closed = true
					break
				}
				b.WriteByte(c)
				i++
			}
			if !closed {
				return fields, quoted, errUnterminatedQuote
			}
			fields, quoted = append(fields, b.String()), append(quoted, true)
			if i == len(line) {
				return fields, quoted, nil
			}
			if line[i] != sep {
				return fields, quoted, errAfterQuote
			}
			i++
			continue
		}
		j := strings.IndexByte(line[i:], sep)
		if j < 0 {
			return append(fields, line[i:]), append(quoted, false), nil
		}
		fields, quoted = append(fields, line[i:i+j]), append(quoted, false)
		i += j + 1
	}
}
