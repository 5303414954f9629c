package receipts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// Strict parsing of an export's lines: encoding/json alone accepts a
// duplicate member (the last wins), matches member names regardless of
// case and ignores unknown ones, so two readers of one line could see two
// different receipts. An export line must have exactly one reading.

// memberKind is the JSON type a member must have.
type memberKind int

const (
	kindString memberKind = iota
	kindInt
	kindBool
	kindObject
)

// schema is the members an object may have, by exact name.
type schema map[string]member

type member struct {
	kind   memberKind
	nested schema // kindObject
}

var timeType = reflect.TypeFor[time.Time]()

// schemaOf derives the members of t, a struct, from its json tags: each
// wire name is defined once, by the type.
func schemaOf(t reflect.Type) schema {
	s := schema{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		switch {
		case f.Type == timeType || f.Type.Kind() == reflect.String:
			s[name] = member{kind: kindString}
		case f.Type.Kind() == reflect.Int || f.Type.Kind() == reflect.Int64:
			s[name] = member{kind: kindInt}
		case f.Type.Kind() == reflect.Bool:
			s[name] = member{kind: kindBool}
		case f.Type.Kind() == reflect.Struct:
			s[name] = member{kind: kindObject, nested: schemaOf(f.Type)}
		default:
			panic("receipts: no schema for " + f.Type.String())
		}
	}
	return s
}

// canonicalInt is an integer as JCS writes it: no sign on zero, no leading
// zeros, no fraction or exponent.
var canonicalInt = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)

// checkStrict checks that raw is one JSON object of s's members, each at
// most once, with exactly their names and types, integers canonical.
func checkStrict(raw []byte, s schema) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := checkObject(dec, s); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value")
	}
	return nil
}

func checkObject(dec *json.Decoder, s schema) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object")
	}
	var seen []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		name, _ := tok.(string)
		for _, prior := range seen {
			if prior == name {
				return fmt.Errorf("member %q appears twice", name)
			}
			if strings.EqualFold(prior, name) {
				return fmt.Errorf("members %q and %q differ only by case", prior, name)
			}
		}
		seen = append(seen, name)
		m, known := s[name]
		if !known {
			for want := range s {
				if strings.EqualFold(want, name) {
					return fmt.Errorf("members %q and %q differ only by case: %q is unknown", name, want, name)
				}
			}
			return fmt.Errorf("unknown member %q", name)
		}
		if m.kind == kindObject {
			if err := checkObject(dec, m.nested); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			continue
		}
		if err := checkValue(dec, name, m.kind); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return fmt.Errorf("not JSON: %w", err)
	}
	return nil
}

func checkValue(dec *json.Decoder, name string, kind memberKind) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	switch v := tok.(type) {
	case string:
		if kind == kindString {
			return nil
		}
	case json.Number:
		if kind == kindInt && !canonicalInt.MatchString(v.String()) {
			return fmt.Errorf("member %q: %s is not a canonical integer", name, v)
		}
		if kind == kindInt {
			return nil
		}
	case bool:
		if kind == kindBool {
			return nil
		}
	}
	return fmt.Errorf("member %q: wrong type", name)
}
