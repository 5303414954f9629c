package keyderive

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"testing"
)

// FuzzCanonicalize checks, for any input: no panic; Decode and Canonicalize
// agree, and agree with the classifying parser; canonical output is a fixed point; and re-encoding the same value
// with reversed member order, other string escapes and added whitespace
// gives the same canonical bytes and the same key.
//
//	go test -run '^$' -fuzz FuzzCanonicalize -fuzztime 10s ./keyderive/
func FuzzCanonicalize(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add([]byte(v.Args))
	}
	for _, seed := range []string{`[]`, `"x"`, `-0`, `{"a":1,"a":2}`, `{"a":"\ud800"}`, `{"n":1e400}`, "{\"a\":\"\xff\"}", `{"a":[{"b":{"c":[]}}]} x`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		value, canonical, err := Decode(input)
		alone, aloneErr := Canonicalize(input)
		if (err == nil) != (aloneErr == nil) || !bytes.Equal(canonical, alone) {
			t.Fatalf("Decode = %q, %v but Canonicalize = %q, %v", canonical, err, alone, aloneErr)
		}
		// Differential check: the classifying parser must agree with the
		// jcs-based fast path on acceptance and on the value tree.
		slowValue, slowErr := parseIJSON(input, true)
		if (err == nil) != (slowErr == nil) {
			t.Fatalf("fast path error %v, classifying parser error %v", err, slowErr)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("rejection %v does not wrap ErrInvalidJSON", err)
			}
			return
		}
		if !reflect.DeepEqual(value, slowValue) {
			t.Fatalf("value trees differ: %#v vs %#v", value, slowValue)
		}
		again, err := Canonicalize(canonical)
		if err != nil || !bytes.Equal(again, canonical) {
			t.Fatalf("not idempotent: %q -> %q, %v", canonical, again, err)
		}
		var reformatted bytes.Buffer
		writeReordered(t, &reformatted, value)
		fromReformatted, err := Canonicalize(reformatted.Bytes())
		if err != nil || !bytes.Equal(fromReformatted, canonical) {
			t.Fatalf("reformatted %q canonicalizes to %q, %v; want %q", reformatted.Bytes(), fromReformatted, err, canonical)
		}
		if _, isObject := value.(map[string]any); !isObject {
			return
		}
		key, err := Key("fuzz-session", 7, "fuzz-tool", input)
		if err != nil {
			t.Fatalf("Key on valid object: %v", err)
		}
		keyReformatted, err := Key("fuzz-session", 7, "fuzz-tool", reformatted.Bytes())
		if err != nil || key != keyReformatted {
			t.Fatalf("key changed with member order/whitespace: %s vs %s, %v", key, keyReformatted, err)
		}
	})
}

// writeReordered encodes a Decode value tree with members in reverse byte
// order, whitespace everywhere and encoding/json's string escaping (which
// escapes <, >, &, U+2028 and U+2029, unlike the canonical form).
func writeReordered(t *testing.T, out *bytes.Buffer, value any) {
	switch v := value.(type) {
	case map[string]any:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(names)))
		out.WriteString("{\n")
		for i, name := range names {
			if i > 0 {
				out.WriteString(" ,\t")
			}
			writeReordered(t, out, name)
			out.WriteString(" : ")
			writeReordered(t, out, v[name])
		}
		out.WriteString("\r\n}")
	case []any:
		out.WriteString("[ ")
		for i, element := range v {
			if i > 0 {
				out.WriteString(" , ")
			}
			writeReordered(t, out, element)
		}
		out.WriteString(" ]")
	default:
		encoded, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("marshal %#v: %v", v, err)
		}
		out.Write(encoded)
	}
}
