package ethrpc

import "encoding/binary"

// validJSON reports whether d is exactly one JSON value with optional
// surrounding white space: json.Valid's answer, for every input
// (FuzzValidJSON checks it against encoding/json). decodeBatch validates a
// batch answer once with it before its decoders, which read valid JSON only.
//
// Why not json.Valid: encoding/json's scanner calls a state function for
// every byte, and a transactions batch is megabytes of long hex strings, so
// the validation pass was the largest client-side cost of the transactions
// freshness bench (issue 43). Here a string is scanned 8 bytes at a time and
// a container needs no call, several times faster (BenchmarkValidJSON).
//
// Like encoding/json's scanner it accepts any byte from 0x20 up inside a
// string (no UTF-8 check: the decoder replaces bad sequences), refuses
// control bytes there, and refuses nesting deeper than maxNestingDepth.
func validJSON(d []byte) bool {
	// stack holds one bit per open container: 1 object, 0 array.
	var stackBuf [8]uint64
	stack := stackBuf[:]
	depth := 0
	i := 0
value:
	i = skipWS(d, i)
	if i >= len(d) {
		return false
	}
	switch c := d[i]; c {
	case '{', '[':
		if depth >= maxNestingDepth {
			return false
		}
		obj := c == '{'
		i = skipWS(d, i+1)
		if i >= len(d) {
			return false
		}
		if (obj && d[i] == '}') || (!obj && d[i] == ']') {
			i++
			break
		}
		if depth/64 == len(stack) {
			stack = append(stack, 0)
		}
		if obj {
			stack[depth/64] |= 1 << (depth % 64)
			if i = validKey(d, i); i < 0 {
				return false
			}
		} else {
			stack[depth/64] &^= 1 << (depth % 64)
		}
		depth++
		goto value
	case '"':
		if i = validString(d, i); i < 0 {
			return false
		}
	case 't':
		if i = literal(d, i, "true"); i < 0 {
			return false
		}
	case 'f':
		if i = literal(d, i, "false"); i < 0 {
			return false
		}
	case 'n':
		if i = literal(d, i, "null"); i < 0 {
			return false
		}
	default:
		if i = validNumber(d, i); i < 0 {
			return false
		}
	}
	// After a value: close containers, or a comma and the next value.
	for {
		i = skipWS(d, i)
		if depth == 0 {
			return i == len(d)
		}
		if i >= len(d) {
			return false
		}
		obj := stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0
		switch d[i] {
		case ',':
			i++
			if obj {
				if i = validKey(d, skipWS(d, i)); i < 0 {
					return false
				}
			}
			goto value
		case '}':
			if !obj {
				return false
			}
		case ']':
			if obj {
				return false
			}
		default:
			return false
		}
		depth--
		i++
	}
}

// maxNestingDepth is encoding/json's limit on nested containers.
const maxNestingDepth = 10000

// validKey checks an object's key and its colon at d[i:] and returns the
// index after the colon, or -1.
func validKey(d []byte, i int) int {
	if i >= len(d) || d[i] != '"' {
		return -1
	}
	if i = validString(d, i); i < 0 {
		return -1
	}
	i = skipWS(d, i)
	if i >= len(d) || d[i] != ':' {
		return -1
	}
	return i + 1
}

// validString checks the string whose opening quote is d[i] and returns the
// index after its closing quote, or -1.
func validString(d []byte, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	i++
	for {
		// Whole words with no quote, backslash or control byte: a word
		// has a byte below 0x20 iff (w - 0x20..) & ^w & 0x80.. is not
		// zero, and a byte equal to b iff w^(b..) has a zero byte.
		for i+8 <= len(d) {
			w := binary.LittleEndian.Uint64(d[i:])
			q := w ^ (ones * '"')
			b := w ^ (ones * '\\')
			if ((w-ones*0x20)&^w|(q-ones)&^q|(b-ones)&^b)&highs != 0 {
				break
			}
			i += 8
		}
		if i >= len(d) {
			return -1
		}
		switch c := d[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i++; i >= len(d) {
				return -1
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 > len(d) {
					return -1
				}
				for _, h := range d[i+1 : i+5] {
					if !isHex(h) {
						return -1
					}
				}
				i += 5
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// literal checks that d[i:] starts with lit and returns the index after it,
// or -1.
func literal(d []byte, i int, lit string) int {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// validNumber checks the number at d[i:] (-?(0|[1-9][0-9]*)(.[0-9]+)?
// ([eE][+-]?[0-9]+)?) and returns the index after it, or -1.
func validNumber(d []byte, i int) int {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i+1)
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// digits returns the index of the first non-digit at or after i.
func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}
