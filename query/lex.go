package query

import (
	"fmt"
	"strings"
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

// lex splits the query into tokens. Comments (-- to end of line, /* */)
// are skipped.
func lex(src string) ([]token, error) {
	var out []token
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, syntaxErr(src, i, "unterminated /* comment")
			}
			i += end + 4
		case isIdentStart(c):
			j := i
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			out = append(out, token{kind: tIdent, text: src[i:j], pos: i})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i
			dot := false
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.' && !dot) {
				if src[j] == '.' {
					dot = true
				}
				j++
			}
			if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
				k := j + 1
				if k < len(src) && (src[k] == '+' || src[k] == '-') {
					k++
				}
				if k < len(src) && src[k] >= '0' && src[k] <= '9' {
					for k < len(src) && src[k] >= '0' && src[k] <= '9' {
						k++
					}
					j = k
				}
			}
			if j < len(src) && isIdentStart(src[j]) {
				return nil, syntaxErr(src, i, "malformed number %q", src[i:j+1])
			}
			out = append(out, token{kind: tNumber, text: src[i:j], pos: i})
			i = j
		case c == '\'' || c == '"':
			s, n, err := lexString(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, token{kind: tString, text: s, pos: i})
			i += n
		case c == '`':
			end := strings.IndexByte(src[i+1:], '`')
			if end < 0 {
				return nil, syntaxErr(src, i, "unterminated quoted identifier")
			}
			if end == 0 {
				return nil, syntaxErr(src, i, "empty quoted identifier")
			}
			out = append(out, token{kind: tQuoted, text: src[i+1 : i+1+end], pos: i})
			i += end + 2
		default:
			p := string(c)
			if i+1 < len(src) {
				switch two := src[i : i+2]; two {
				case "<=", ">=", "<>", "!=", "==", "||", "&&":
					p = two
				}
			}
			if !strings.Contains("(),*;=<>!.+-/%|&[]{}:", p[:1]) {
				return nil, syntaxErr(src, i, "unexpected character %q", string(rune(src[i])))
			}
			out = append(out, token{kind: tPunct, text: p, pos: i})
			i += len(p)
		}
	}
	out = append(out, token{kind: tEOF, pos: len(src)})
	return out, nil
}

// lexString reads a string literal starting at src[i] (its quote) and
// returns its value and length. A quote is escaped by doubling it or with a
// backslash, as Spark accepts.
func lexString(src string, i int) (string, int, error) {
	q := src[i]
	var b strings.Builder
	j := i + 1
	for j < len(src) {
		c := src[j]
		switch {
		case c == '\\' && j+1 < len(src):
			b.WriteByte(src[j+1])
			j += 2
		case c == q && j+1 < len(src) && src[j+1] == q:
			b.WriteByte(q)
			j += 2
		case c == q:
			return b.String(), j + 1 - i, nil
		default:
			b.WriteByte(c)
			j++
		}
	}
	return "", 0, syntaxErr(src, i, "unterminated string")
}

func isIdentStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// position renders a byte offset as line:column (both from 1).
func position(src string, off int) string {
	off = min(off, len(src))
	line := 1 + strings.Count(src[:off], "\n")
	col := off + 1
	if k := strings.LastIndexByte(src[:off], '\n'); k >= 0 {
		col = off - k
	}
	return fmt.Sprintf("%d:%d", line, col)
}
