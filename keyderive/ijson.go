package keyderive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects accepted. Tool
// arguments never need more, and a bound keeps hostile input from costing
// stack and time.
const MaxDepth = 128

// ijsonParser walks JSON text once with encoding/json's tokenizer and adds the
// I-JSON checks it lacks: encoding/json silently replaces lone surrogates and
// invalid UTF-8 with U+FFFD and keeps the last of duplicate names, all of
// which would let two different byte strings mean "the same" arguments.
type ijsonParser struct {
	input []byte
	dec   *json.Decoder
	// build is false when only validation is wanted (Canonicalize, Key), so
	// the value tree is not allocated.
	build bool
	depth int
}

// parseIJSON validates input as one I-JSON value and, when build is true,
// returns its value tree (map[string]any, []any, json.Number, string, bool,
// nil).
func parseIJSON(input []byte, build bool) (any, error) {
	if !utf8.Valid(input) {
		return nil, fmt.Errorf("%w at byte %d", ErrInvalidUTF8, firstInvalidUTF8(input))
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	p := &ijsonParser{input: input, dec: dec, build: build}
	value, err := p.value()
	if err != nil {
		return nil, err
	}
	end := int(dec.InputOffset())
	if len(bytes.TrimLeft(input[end:], " \t\r\n")) != 0 {
		return nil, fmt.Errorf("%w: data after the top-level value at byte %d", ErrSyntax, end)
	}
	return value, nil
}

// token returns the next token and the raw bytes it spans together with the
// whitespace and ',' / ':' before it (the tokenizer consumes those as part of
// the token).
func (p *ijsonParser) token() (json.Token, []byte, error) {
	start := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, nil, p.syntaxError(err)
	}
	return tok, p.input[start:p.dec.InputOffset()], nil
}

func (p *ijsonParser) syntaxError(err error) error {
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("%w at byte %d: %s", ErrSyntax, syntax.Offset, syntax.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: unexpected end of input", ErrSyntax)
	default:
		return fmt.Errorf("%w: %s", ErrSyntax, err.Error())
	}
}

func (p *ijsonParser) value() (any, error) {
	tok, raw, err := p.token()
	if err != nil {
		return nil, err
	}
	return p.valueFrom(tok, raw)
}

func (p *ijsonParser) valueFrom(tok json.Token, raw []byte) (any, error) {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return p.object()
		case '[':
			return p.array()
		default:
			// Token already rejects unbalanced delimiters; kept for safety.
			return nil, fmt.Errorf("%w: unexpected %q", ErrSyntax, rune(t))
		}
	case string:
		if err := p.checkEscapes(raw); err != nil {
			return nil, err
		}
		return t, nil
	case json.Number:
		if err := checkNumber(t); err != nil {
			return nil, err
		}
		return t, nil
	default: // bool, nil
		return t, nil
	}
}

func (p *ijsonParser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return fmt.Errorf("%w: more than %d levels at byte %d", ErrTooDeep, MaxDepth, p.dec.InputOffset()-1)
	}
	return nil
}

func (p *ijsonParser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	var members map[string]any
	if p.build {
		members = map[string]any{}
	}
	// Without a tree the names still have to be remembered to find duplicates.
	var seen map[string]struct{}
	for p.dec.More() {
		tok, raw, err := p.token()
		if err != nil {
			return nil, err
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: object member name is not a string", ErrSyntax)
		}
		if err := p.checkEscapes(raw); err != nil {
			return nil, err
		}
		// Lone surrogates are rejected above, so equal decoded names are
		// exactly equal UTF-16 names, as RFC 8785 compares them.
		if p.build {
			if _, dup := members[name]; dup {
				return nil, fmt.Errorf("%w at byte %d", ErrDuplicateName, p.dec.InputOffset())
			}
		} else {
			if seen == nil {
				seen = map[string]struct{}{}
			}
			if _, dup := seen[name]; dup {
				return nil, fmt.Errorf("%w at byte %d", ErrDuplicateName, p.dec.InputOffset())
			}
			seen[name] = struct{}{}
		}
		value, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.build {
			members[name] = value
		}
	}
	if _, _, err := p.token(); err != nil { // the closing '}'
		return nil, err
	}
	p.depth--
	if !p.build {
		return nil, nil
	}
	return members, nil
}

func (p *ijsonParser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	var elements []any
	if p.build {
		elements = []any{}
	}
	for p.dec.More() {
		value, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.build {
			elements = append(elements, value)
		}
	}
	if _, _, err := p.token(); err != nil { // the closing ']'
		return nil, err
	}
	p.depth--
	if !p.build {
		return nil, nil
	}
	return elements, nil
}

// checkEscapes rejects \u escapes of surrogates that do not form a high+low
// pair. raw is the string token as it appears in the input, possibly preceded
// by whitespace, ',' or ':' (none of which contains a '"').
func (p *ijsonParser) checkEscapes(raw []byte) error {
	first := bytes.IndexByte(raw, '\\')
	if first < 0 {
		return nil // the common case: nothing to decode
	}
	quote := bytes.IndexByte(raw, '"')
	s := raw[quote+1 : len(raw)-1]
	for i := first - quote - 1; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		i++ // the escaped character; the tokenizer has checked the grammar
		if s[i] != 'u' {
			continue
		}
		unit := hex4(s[i+1 : i+5])
		i += 4
		switch {
		case utf16.IsSurrogate(unit) && unit < 0xDC00: // high: a low must follow
			if i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if low := hex4(s[i+3 : i+7]); low >= 0xDC00 && low <= 0xDFFF {
					i += 6
					continue
				}
			}
			return fmt.Errorf("%w: \\u%04X without a low surrogate", ErrLoneSurrogate, unit)
		case utf16.IsSurrogate(unit):
			return fmt.Errorf("%w: \\u%04X without a high surrogate", ErrLoneSurrogate, unit)
		}
	}
	return nil
}

// hex4 decodes four hex digits the tokenizer has already validated.
func hex4(digits []byte) rune {
	var r rune
	for _, c := range digits {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// checkNumber accepts any number whose value rounds to a finite double.
// Integers beyond 2^53 and underflow to zero are accepted, as RFC 8785 reads
// every number as a double; only a magnitude beyond the double range fails.
func checkNumber(n json.Number) error {
	if _, err := strconv.ParseFloat(string(n), 64); err != nil {
		return fmt.Errorf("%w: %.40q", ErrNumberRange, string(n))
	}
	return nil
}

func firstInvalidUTF8(input []byte) int {
	for i := 0; i < len(input); {
		r, size := utf8.DecodeRune(input[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(input)
}
