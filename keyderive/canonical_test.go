package keyderive

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestCanonicalizeRejects(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	deepObject := strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	cases := []struct {
		name  string
		input string
		want  error
	}{
		{"empty", "", ErrSyntax},
		{"whitespace only", " \n", ErrSyntax},
		{"byte order mark", "\uFEFF{}", ErrSyntax},
		{"trailing garbage", `{"a":1} x`, ErrSyntax},
		{"two values", `{} {}`, ErrSyntax},
		{"trailing comma", `{"a":1,}`, ErrSyntax},
		{"single quotes", `{'a':1}`, ErrSyntax},
		{"unquoted name", `{a:1}`, ErrSyntax},
		{"leading zero", `{"a":01}`, ErrSyntax},
		{"plus sign", `{"a":+1}`, ErrSyntax},
		{"NaN", `{"a":NaN}`, ErrSyntax},
		{"hex number", `{"a":0x10}`, ErrSyntax},
		{"bare dot", `{"a":.5}`, ErrSyntax},
		{"raw control character", "{\"a\":\"\x01\"}", ErrSyntax},
		{"bad escape", `{"a":"\x41"}`, ErrSyntax},
		{"unterminated", `{"a":[1,2`, ErrSyntax},
		{"comment", `{"a":1 /* c */}`, ErrSyntax},
		{"duplicate name", `{"a":1,"b":2,"a":3}`, ErrDuplicateName},
		{"duplicate name via escape", `{"a":1,"\u0061":2}`, ErrDuplicateName},
		{"duplicate non-BMP name", `{"😀":1,"\ud83d\ude00":2}`, ErrDuplicateName},
		{"duplicate nested", `{"x":[{"k":1,"k":1}]}`, ErrDuplicateName},
		{"lone high surrogate", `{"a":"\ud800"}`, ErrLoneSurrogate},
		{"lone high surrogate then text", `{"a":"\ud800abcdef"}`, ErrLoneSurrogate},
		{"high then high", `{"a":"\ud800\ud800"}`, ErrLoneSurrogate},
		{"lone low surrogate", `{"a":"\uDC00"}`, ErrLoneSurrogate},
		{"reversed pair", `{"a":"\udc00\ud800"}`, ErrLoneSurrogate},
		{"lone surrogate in name", `{"\ud83d":1}`, ErrLoneSurrogate},
		{"high surrogate then other escape", `{"a":"\ud83d\n"}`, ErrLoneSurrogate},
		{"invalid UTF-8 byte", "{\"a\":\"\xff\"}", ErrInvalidUTF8},
		{"UTF-8 encoded surrogate", "{\"a\":\"\xed\xa0\x80\"}", ErrInvalidUTF8},
		{"overlong UTF-8", "{\"a\":\"\xc0\xaf\"}", ErrInvalidUTF8},
		{"number too large", `{"a":1e400}`, ErrNumberRange},
		{"negative number too large", `{"a":-1.8e308}`, ErrNumberRange},
		{"too deep array", deep, ErrTooDeep},
		{"too deep object", deepObject, ErrTooDeep},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Canonicalize([]byte(tc.input))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Canonicalize(%q) error = %v, want %v", tc.input, err, tc.want)
			}
			if !errors.Is(err, ErrInvalidJSON) {
				t.Errorf("error %v does not wrap ErrInvalidJSON", err)
			}
			if _, _, decodeErr := Decode([]byte(tc.input)); !errors.Is(decodeErr, tc.want) {
				t.Errorf("Decode error = %v, want %v", decodeErr, tc.want)
			}
			if _, keyErr := Key("s", 1, "t", []byte(tc.input)); !errors.Is(keyErr, tc.want) {
				t.Errorf("Key error = %v, want %v", keyErr, tc.want)
			}
		})
	}
}

func TestReasonsAreDistinct(t *testing.T) {
	reasons := []error{ErrSyntax, ErrDuplicateName, ErrLoneSurrogate, ErrInvalidUTF8, ErrNumberRange, ErrTooDeep}
	for i, a := range reasons {
		if !errors.Is(a, ErrInvalidJSON) {
			t.Errorf("%v does not match ErrInvalidJSON", a)
		}
		for j, b := range reasons {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v matches %v", a, b)
			}
		}
	}
	if errors.Is(ErrNotObject, ErrInvalidJSON) {
		t.Error("ErrNotObject must not match ErrInvalidJSON")
	}
}

func TestCanonicalizeAcceptsAtMaxDepth(t *testing.T) {
	input := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	got, err := Canonicalize([]byte(input))
	if err != nil || string(got) != input {
		t.Fatalf("Canonicalize at MaxDepth = %q, %v", got, err)
	}
}

func TestCanonicalizeTopLevelValues(t *testing.T) {
	cases := map[string]string{
		` "a\u00e9" `:           `"aé"`,
		"1E2":                   "100",
		" -0 ":                  "0",
		"true":                  "true",
		"null\n":                "null",
		`[ 1 , {"b":2,"a":1} ]`: `[1,{"a":1,"b":2}]`,
	}
	for input, want := range cases {
		got, err := Canonicalize([]byte(input))
		if err != nil || string(got) != want {
			t.Errorf("Canonicalize(%q) = %q, %v; want %q", input, got, err, want)
		}
	}
}

func TestKeyRequiresObject(t *testing.T) {
	for _, input := range []string{`[]`, `"x"`, `1`, `null`, `true`} {
		_, err := Key("s", 1, "t", []byte(input))
		if !errors.Is(err, ErrNotObject) {
			t.Errorf("Key(%s) error = %v, want ErrNotObject", input, err)
		}
	}
}

func TestDecodeValueTree(t *testing.T) {
	value, canonical, err := Decode([]byte(`{"n":1.50,"big":12345678901234567890,"s":"\ud83d\ude00","a":[true,null,{}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"n":   json.Number("1.50"),
		"big": json.Number("12345678901234567890"),
		"s":   "😀",
		"a":   []any{true, nil, map[string]any{}},
	}
	if !reflect.DeepEqual(value, want) {
		t.Errorf("value = %#v\nwant %#v", value, want)
	}
	if got := `{"a":[true,null,{}],"big":12345678901234567000,"n":1.5,"s":"😀"}`; string(canonical) != got {
		t.Errorf("canonical = %s, want %s", canonical, got)
	}
}

func TestDecodeCanonicalValueTree(t *testing.T) {
	value, canonical, err := DecodeCanonical([]byte(`{"n":1.50,"big":12345678901234567890,"zero":1e-400,"s":"\ud83d\ude00"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"n":    json.Number("1.5"),
		"big":  json.Number("12345678901234567000"),
		"zero": json.Number("0"),
		"s":    "😀",
	}
	if !reflect.DeepEqual(value, want) {
		t.Errorf("value = %#v\nwant %#v", value, want)
	}
	if got := `{"big":12345678901234567000,"n":1.5,"s":"😀","zero":0}`; string(canonical) != got {
		t.Errorf("canonical = %s, want %s", canonical, got)
	}
}

func TestFingerprint(t *testing.T) {
	// SHA-256 of "{}", computed with: printf '%s' '{}' | sha256sum
	const want = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
	if got := Fingerprint([]byte("{}")); got != want {
		t.Errorf("Fingerprint({}) = %s, want %s", got, want)
	}
}

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
