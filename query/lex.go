package query

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tQuoted // `quoted identifier`
	tString
	tNumber
	tPunct
)

type token struct {
	kind tokKind
	text string // identifier (as written), string value, number text, punctuation
	pos  int    // byte offset in the query
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of query"
	case tString:
		return "'" + t.text + "'"
	case tQuoted:
		return "`" + t.text + "`"
	}
	return "'" + t.text + "'"
}

// is reports whether t is the keyword kw (case-insensitive, unquoted).
func (t token) is(kw string) bool { return t.kind == tIdent && strings.EqualFold(t.text, kw) }

func (t token) punct(p string) bool { return t.kind == tPunct && t.text == p }

// lex splits the query into tokens as Spark's SqlBaseLexer does: comments
// (-- to end of line; /* */, nested) are skipped, string literals are
// unescaped (unescapeSQLString), and adjacent string literals are one
// literal (Spark's stringLit+: 'a' 'b' is 'ab', and so is 'a”b', because
// the lexer ends a literal at its second quote).
func lex(src string) ([]token, error) {
	var out []token
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			if i+2 < len(src) && src[i+2] == '+' {
				return nil, unsupported(src, i, "hints (/*+ ... */)")
			}
			n, err := skipComment(src, i)
			if err != nil {
				return nil, err
			}
			i += n
		case (c == 'r' || c == 'R') && i+1 < len(src) && (src[i+1] == '\'' || src[i+1] == '"'):
			// A raw string: no escapes, ends at the next quote.
			end := strings.IndexByte(src[i+2:], src[i+1])
			if end < 0 {
				return nil, syntaxErr(src, i, "unterminated string")
			}
			out = appendString(out, src[i+2:i+2+end], i)
			i += end + 3
		case isIdentStart(c) || c >= utf8.RuneSelf && isUnicodeLetter(src[i:]):
			j := i
			for j < len(src) {
				if isIdentPart(src[j]) {
					j++
					continue
				}
				if src[j] >= utf8.RuneSelf && isUnicodeLetter(src[j:]) {
					_, n := utf8.DecodeRuneInString(src[j:])
					j += n
					continue
				}
				break
			}
			out = append(out, token{kind: tIdent, text: src[i:j], pos: i})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			n, err := lexNumber(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, token{kind: tNumber, text: src[i : i+n], pos: i})
			i += n
		case c == '\'' || c == '"':
			s, n, err := lexString(src, i)
			if err != nil {
				return nil, err
			}
			out = appendString(out, s, i)
			i += n
		case c == '`':
			s, n, err := lexQuoted(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, token{kind: tQuoted, text: s, pos: i})
			i += n
		default:
			t, err := lexPunct(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
			i += len(t.text)
		}
	}
	out = append(out, token{kind: tEOF, pos: len(src)})
	return out, nil
}

// lexPunct reads the operator or punctuation at src[i].
func lexPunct(src string, i int) (token, error) {
	p := src[i : i+1]
	if i+2 < len(src) && src[i:i+3] == "<=>" {
		p = "<=>"
	} else if i+1 < len(src) {
		switch two := src[i : i+2]; two {
		case "<=", ">=", "<>", "!=", "==", "||", "&&":
			p = two
		}
	}
	if !strings.Contains("(),*;=<>!.+-/%|&[]{}:", p[:1]) {
		r, _ := utf8.DecodeRuneInString(src[i:])
		return token{}, syntaxErr(src, i, "unexpected character %q", string(r))
	}
	return token{kind: tPunct, text: p, pos: i}, nil
}

// appendString appends a string literal, joining it to a string literal
// right before it (Spark concatenates adjacent literals).
func appendString(out []token, s string, pos int) []token {
	if n := len(out); n > 0 && out[n-1].kind == tString {
		out[n-1].text += s
		return out
	}
	return append(out, token{kind: tString, text: s, pos: pos})
}

// skipComment returns the length of the bracketed comment at src[i]; a
// comment inside it nests, as in Spark's BRACKETED_COMMENT rule.
func skipComment(src string, i int) (int, error) {
	depth := 0
	j := i
	for j+1 < len(src) {
		switch {
		case src[j] == '/' && src[j+1] == '*':
			depth++
			j += 2
		case src[j] == '*' && src[j+1] == '/':
			depth--
			j += 2
			if depth == 0 {
				return j - i, nil
			}
		default:
			j++
		}
	}
	return 0, syntaxErr(src, i, "unclosed /* comment (found no matching */)")
}

// lexNumber returns the length of the numeric literal at src[i]: digits
// with an optional fraction and exponent, and Spark's type suffixes L, S,
// Y, F, D, BD (in any case). A letter, digit or underscore right after it
// makes it malformed, as Spark's isValidDecimal.
func lexNumber(src string, i int) (int, error) {
	j := i
	for j < len(src) && isDigit(src[j]) {
		j++
	}
	if j < len(src) && src[j] == '.' {
		j++
		for j < len(src) && isDigit(src[j]) {
			j++
		}
	}
	if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
		k := j + 1
		if k < len(src) && (src[k] == '+' || src[k] == '-') {
			k++
		}
		if k < len(src) && isDigit(src[k]) {
			for k < len(src) && isDigit(src[k]) {
				k++
			}
			j = k
		}
	}
	if j+1 < len(src) && strings.EqualFold(src[j:j+2], "bd") {
		j += 2
	} else if j < len(src) && strings.ContainsRune("lLsSyYfFdD", rune(src[j])) {
		j++
	}
	if j < len(src) && (isIdentPart(src[j]) || src[j] >= utf8.RuneSelf && isUnicodeLetter(src[j:])) {
		k := j
		for k < len(src) && isIdentPart(src[k]) {
			k++
		}
		return 0, syntaxErr(src, i, "malformed number %q", src[i:max(k, j+1)])
	}
	return j - i, nil
}

// lexString reads a string literal starting at src[i] (its quote) and
// returns its value and length: Spark's STRING_LITERAL (a backslash escapes
// the next character; the literal ends at the next unescaped quote) decoded
// by unescapeSQLString: \0 \b \n \r \t \Z, \uXXXX, \UXXXXXXXX, three-digit
// octal \[01][0-7][0-7], \% and \_ kept with their backslash (for LIKE), and
// any other escaped character as itself (\' \" \\).
func lexString(src string, i int) (string, int, error) {
	q := src[i]
	j := i + 1
	for j < len(src) && src[j] != q {
		if src[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(src) {
		return "", 0, syntaxErr(src, i, "unterminated string")
	}
	return unescape(src[i+1 : j]), j + 1 - i, nil
}

// unescape decodes the body of a string literal (unescapeSQLString). \u
// escapes are UTF-16 code units, so a surrogate pair written as two \u
// escapes is one character, as in Spark.
func unescape(b string) string {
	if !strings.Contains(b, `\`) {
		return b
	}
	var units []uint16 // pending UTF-16 code units from \u escapes
	var sb strings.Builder
	flush := func() {
		if len(units) > 0 {
			sb.WriteString(string(utf16.Decode(units)))
			units = units[:0]
		}
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c != '\\' || i+1 == len(b) {
			flush()
			sb.WriteByte(c)
			i++
			continue
		}
		i++
		n := b[i]
		switch {
		case n == 'u' && i+5 <= len(b) && allHex(b[i+1:i+5]):
			units = append(units, uint16(hexVal(b[i+1:i+5])))
			i += 5
			continue
		case n == 'U' && i+9 <= len(b) && allHex(b[i+1:i+9]):
			flush()
			cp := hexVal(b[i+1 : i+9])
			if cp < 0x10000 {
				units = append(units, uint16(cp))
			} else {
				r1, r2 := utf16.EncodeRune(rune(cp))
				if r1 == unicode.ReplacementChar {
					sb.WriteRune(unicode.ReplacementChar)
				} else {
					units = append(units, uint16(r1), uint16(r2))
				}
			}
			i += 9
			continue
		case i+3 <= len(b) && (n == '0' || n == '1') && isOctal(b[i+1]) && isOctal(b[i+2]):
			flush()
			sb.WriteRune(rune((n-'0')*64 + (b[i+1]-'0')*8 + (b[i+2] - '0')))
			i += 3
			continue
		}
		flush()
		switch n {
		case '0':
			sb.WriteByte(0)
		case 'b':
			sb.WriteByte('\b')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'Z':
			sb.WriteByte(0x1A)
		case '%', '_':
			sb.WriteByte('\\')
			sb.WriteByte(n)
		default:
			// Any other escaped character stands for itself; a multi-byte
			// character is copied whole.
			_, size := utf8.DecodeRuneInString(b[i:])
			sb.WriteString(b[i : i+size])
			i += size
			continue
		}
		i++
	}
	flush()
	return sb.String()
}

// lexQuoted reads a `quoted identifier`; a doubled backquote is one.
func lexQuoted(src string, i int) (string, int, error) {
	var sb strings.Builder
	j := i + 1
	for {
		k := strings.IndexByte(src[j:], '`')
		if k < 0 {
			return "", 0, syntaxErr(src, i, "unterminated quoted identifier")
		}
		sb.WriteString(src[j : j+k])
		j += k + 1
		if j < len(src) && src[j] == '`' {
			sb.WriteByte('`')
			j++
			continue
		}
		break
	}
	if sb.Len() == 0 {
		return "", 0, syntaxErr(src, i, "empty quoted identifier")
	}
	return sb.String(), j - i, nil
}

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) && !(s[i] >= 'a' && s[i] <= 'f') && !(s[i] >= 'A' && s[i] <= 'F') {
			return false
		}
	}
	return true
}

func hexVal(s string) uint32 {
	var v uint32
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		v = v<<4 | uint32(c)
	}
	return v
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// isUnicodeLetter reports whether s starts with a non-ASCII letter, which
// Spark's lexer takes into an identifier ([\p{L}]).
func isUnicodeLetter(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r != utf8.RuneError && unicode.IsLetter(r)
}

// position renders a byte offset as line:column (both from 1; the column
// counts characters, not bytes).
func position(src string, off int) string {
	off = min(off, len(src))
	line := 1 + strings.Count(src[:off], "\n")
	lineStart := strings.LastIndexByte(src[:off], '\n') + 1
	return fmt.Sprintf("%d:%d", line, utf8.RuneCountInString(src[lineStart:off])+1)
}
