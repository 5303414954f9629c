package keyderive

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The fast path. Every SDK sends its arguments already in RFC 8785 form, so
// the gateway's common case is a body that is its own canonical form. A
// single pass (canonicalScanner) verifies that without building anything:
// no whitespace, members strictly sorted by UTF-16 code units (which also
// rules out duplicate names), strings in JCS escaping (only '"', '\\' and
// control characters escaped, the short forms where JSON has them, \u00xx
// in lowercase otherwise; valid UTF-8), numbers already in their ES6
// shortest spelling, nesting within MaxDepth. When it succeeds the
// canonical form is the body itself; when it can, the same pass builds the
// value tree. Any deviation, valid JSON or not, sends the input to the
// general path (jcs.Transform, then the classifying parser on a
// rejection), so what is rejected and how is unchanged. FuzzFastPath checks
// that both paths agree on every input.

// canonicalScanner walks text that should be canonical JSON.
type canonicalScanner struct {
	in    []byte
	pos   int
	depth int
	// build: also return the value tree (map[string]any, []any,
	// json.Number, string, bool, nil), as json.Decoder with UseNumber
	// would decode the same bytes.
	build bool
}

// scanCanonical reports whether in is exactly the RFC 8785 form of one
// I-JSON value nested at most MaxDepth deep and, when build is true, returns
// its value tree.
func scanCanonical(in []byte, build bool) (value any, ok bool) {
	s := canonicalScanner{in: in, build: build}
	value, ok = s.value()
	if !ok || s.pos != len(in) {
		return nil, false
	}
	return value, true
}

func (s *canonicalScanner) value() (any, bool) {
	if s.pos >= len(s.in) {
		return nil, false
	}
	switch c := s.in[s.pos]; c {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		start, end, escaped, ok := s.str()
		if !ok {
			return nil, false
		}
		if !s.build {
			return nil, true
		}
		return decodeCanonicalString(s.in[start:end], escaped), true
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	case 'n':
		return nil, s.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return s.number()
		}
		return nil, false
	}
}

func (s *canonicalScanner) literal(word string) bool {
	if len(s.in)-s.pos < len(word) || string(s.in[s.pos:s.pos+len(word)]) != word {
		return false
	}
	s.pos += len(word)
	return true
}

func (s *canonicalScanner) object() (any, bool) {
	s.depth++
	if s.depth > MaxDepth {
		return nil, false
	}
	s.pos++ // '{'
	if s.pos < len(s.in) && s.in[s.pos] == '}' {
		s.pos++
		s.depth--
		if s.build {
			return map[string]any{}, true
		}
		return nil, true
	}
	// Made at the first member, so input that is not canonical (a
	// pretty-printed body fails at its first newline) costs nothing here.
	var members map[string]any
	var previous []byte
	havePrevious := false
	for {
		if s.pos >= len(s.in) || s.in[s.pos] != '"' {
			return nil, false
		}
		start, end, escaped, ok := s.str()
		if !ok {
			return nil, false
		}
		name := s.in[start:end]
		// Strictly ascending: equal names are duplicates, out-of-order ones
		// are valid JSON that is not canonical; both go the general way.
		if havePrevious && compareUTF16(previous, name) >= 0 {
			return nil, false
		}
		previous, havePrevious = name, true
		if s.pos >= len(s.in) || s.in[s.pos] != ':' {
			return nil, false
		}
		s.pos++
		value, ok := s.value()
		if !ok {
			return nil, false
		}
		if s.build {
			if members == nil {
				members = map[string]any{}
			}
			members[decodeCanonicalString(name, escaped)] = value
		}
		if s.pos >= len(s.in) {
			return nil, false
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return members, true
		default:
			return nil, false
		}
	}
}

func (s *canonicalScanner) array() (any, bool) {
	s.depth++
	if s.depth > MaxDepth {
		return nil, false
	}
	s.pos++ // '['
	var elements []any
	if s.build {
		elements = []any{}
	}
	if s.pos < len(s.in) && s.in[s.pos] == ']' {
		s.pos++
		s.depth--
		return elements, true
	}
	for {
		value, ok := s.value()
		if !ok {
			return nil, false
		}
		if s.build {
			elements = append(elements, value)
		}
		if s.pos >= len(s.in) {
			return nil, false
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return elements, true
		default:
			return nil, false
		}
	}
}

// str scans a string in JCS escaping from its opening quote; start and end
// delimit its contents (without quotes), escaped says whether any escape
// occurs in them.
func (s *canonicalScanner) str() (start, end int, escaped, ok bool) {
	s.pos++ // '"'
	start = s.pos
	in := s.in
	for i := s.pos; i < len(in); {
		c := in[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return start, i, escaped, true
		case c == '\\':
			if i+1 >= len(in) {
				return 0, 0, false, false
			}
			escaped = true
			switch in[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				// Only control characters without a short form are
				// written as \u00xx, in lowercase hex.
				if i+6 > len(in) || in[i+2] != '0' || in[i+3] != '0' || (in[i+4] != '0' && in[i+4] != '1') {
					return 0, 0, false, false
				}
				low, isHex := lowerHexDigit(in[i+5])
				if !isHex {
					return 0, 0, false, false
				}
				switch unit := (in[i+4]-'0')<<4 | low; unit {
				case '\b', '\f', '\n', '\r', '\t':
					return 0, 0, false, false
				}
				i += 6
			default:
				return 0, 0, false, false
			}
		case c < 0x20:
			return 0, 0, false, false
		case c < utf8.RuneSelf:
			i++
		default:
			// utf8.DecodeRune also rejects UTF-8-encoded surrogates and
			// overlong forms.
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size <= 1 {
				return 0, 0, false, false
			}
			i += size
		}
	}
	return 0, 0, false, false
}

func lowerHexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// number scans a number and checks that it is spelled as ES6 (and so JCS)
// would spell its double.
func (s *canonicalScanner) number() (any, bool) {
	start := s.pos
	in := s.in
	i := s.pos
	if in[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	plainInteger := true
	if i < len(in) && in[i] == '.' {
		plainInteger = false
		i++
		digits := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == digits {
			return nil, false
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		plainInteger = false
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		digits := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == digits {
			return nil, false
		}
	}
	text := in[start:i]
	s.pos = i
	switch {
	case plainInteger && string(text) == "-0":
		return nil, false // JCS writes 0
	case plainInteger && i-intStart <= 15:
		// Below 10^15 < 2^53 every integer is a double exactly, and ES6
		// writes it in plain digits.
	default:
		if !isES6Spelling(text) {
			return nil, false
		}
	}
	if !s.build {
		return nil, true
	}
	return json.Number(text), true
}

// isES6Spelling reports whether text (a number in JSON grammar) is exactly
// what jcs.NumberToJSON writes for its double.
func isES6Spelling(text []byte) bool {
	if len(text) > 40 {
		return false // longer than any ES6 spelling of a double
	}
	var buf [40]byte
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return false
	}
	return string(appendES6(buf[:0], f)) == string(text)
}

// appendES6 appends the ES6 Number-to-String spelling of a finite double,
// as jcs.NumberToJSON writes it, without allocating.
func appendES6(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // also -0
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	format := byte('e')
	if f < 1e21 && f >= 1e-6 {
		format = 'f'
	}
	mark := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Go writes "1e+09"; ES6 writes "1e+9".
		for i := mark; i < len(dst); i++ {
			if dst[i] == 'e' {
				if i+2 < len(dst) && dst[i+2] == '0' {
					dst = append(dst[:i+2], dst[i+3:]...)
				}
				break
			}
		}
	}
	return dst
}

// decodeCanonicalString decodes the contents of a string in JCS escaping.
func decodeCanonicalString(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw)
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u': // \u00xx, checked by str
			high := raw[i+3] - '0'
			low, _ := lowerHexDigit(raw[i+4])
			out = append(out, high<<4|low)
			i += 4
		default: // '"', '\\'
			out = append(out, raw[i])
		}
	}
	return string(out)
}

// compareUTF16 compares two string contents in JCS escaping (as str
// checked them) by their UTF-16 code units, as RFC 8785 sorts names.
func compareUTF16(a, b []byte) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		// The common case: both ASCII and unescaped, where byte order is
		// code unit order.
		if ca, cb := a[i], b[j]; ca < utf8.RuneSelf && cb < utf8.RuneSelf && ca != '\\' && cb != '\\' {
			if ca != cb {
				return int(ca) - int(cb)
			}
			i++
			j++
			continue
		}
		ra, na := nextCanonicalRune(a[i:])
		rb, nb := nextCanonicalRune(b[j:])
		i += na
		j += nb
		if ra == rb {
			continue
		}
		// Different runes: compare their first code units; two
		// supplementary runes with the same high surrogate differ in the
		// low one, which orders like the runes themselves.
		if ua, ub := firstUnit(ra), firstUnit(rb); ua != ub {
			return int(ua) - int(ub)
		}
		return int(ra) - int(rb)
	}
	return (len(a) - i) - (len(b) - j)
}

// nextCanonicalRune decodes the first character of string contents in JCS
// escaping and reports how many bytes it spans.
func nextCanonicalRune(s []byte) (rune, int) {
	if s[0] != '\\' {
		if s[0] < utf8.RuneSelf {
			return rune(s[0]), 1
		}
		return utf8.DecodeRune(s)
	}
	switch s[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		low, _ := lowerHexDigit(s[5])
		return rune(s[4]-'0')<<4 | rune(low), 6
	default:
		return rune(s[1]), 2
	}
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) uint16 {
	if r < 0x10000 {
		return uint16(r)
	}
	return uint16(0xD800 + ((r - 0x10000) >> 10))
}
