package keyderive

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// decodeWithUseNumber is the reference value tree: what json.Decoder with
// UseNumber makes of the same bytes.
func decodeWithUseNumber(t *testing.T, text []byte) any {
	t.Helper()
	decoder := json.NewDecoder(bytes.NewReader(text))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		t.Fatalf("json.Decoder on %q: %v", text, err)
	}
	return value
}

func TestFastPathAcceptsCanonical(t *testing.T) {
	for _, in := range []string{
		`{}`, `[]`, `""`, `0`, `-1`, `true`, `false`, `null`,
		`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`,
		`{"n":[1.5,-0.001,1e+21,1e-7,123456789012345,9007199254740992,0.1]}`,
		`{"s":"\"\\\b\f\n\r\t\u0000\u001f` + "\x7f/<>&\u2028é😀" + `"}`,
		// UTF-16 order: U+1F600 (high surrogate D83D) sorts before U+E000.
		`{"` + "😀" + `":1,"` + "\ue000" + `":2}`,
		`{"\u0001":1,"\n":2,"a":3,"aa":4,"b":5}`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	} {
		if _, ok := scanCanonical([]byte(in), false); !ok {
			t.Errorf("scanCanonical(%q) rejected canonical input", in)
		}
		want, err := jcs.Transform([]byte(in))
		if err != nil || string(want) != in {
			t.Fatalf("test input %q is not canonical: jcs gives %q, %v", in, want, err)
		}
		value, ok := scanCanonical([]byte(in), true)
		if !ok || !reflect.DeepEqual(value, decodeWithUseNumber(t, []byte(in))) {
			t.Errorf("tree of %q = %#v, %v; want json.Decoder's", in, value, ok)
		}
	}
}

func TestFastPathRejectsNonCanonical(t *testing.T) {
	for _, in := range []string{
		``, ` {}`, `{} `, `{ }`, `{"a": 1}`, `{"b":1,"a":2}`, `{"a":1,"a":1}`,
		`1.0`, `1.50`, `-0`, `1E2`, `1e2`, `1e+021`, `0.0000001`, `1000000000000000000000`,
		`12345678901234567890`, `01`, `.5`, `1.`, `1e400`, `1e-400`,
		`"\u000a"`, `"\u001F"`, `"\u007f"`, `"\u0020"`, `"\/"`, `"\ud83d\ude00"`, `"\x"`,
		"\"\x01\"", "\"\xff\"", "\"\xed\xa0\x80\"", `"unterminated`,
		`{"` + "\ue000" + `":2,"` + "😀" + `":1}`,
		`[1,]`, `{"a":1,}`, `[1 ]`, `tru`, `nul`, `falsey`, `{"a"}`,
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		if _, ok := scanCanonical([]byte(in), false); ok {
			t.Errorf("scanCanonical(%q) accepted non-canonical input", in)
		}
		if _, ok := scanCanonical([]byte(in), true); ok {
			t.Errorf("scanCanonical(%q, build) accepted non-canonical input", in)
		}
	}
}

// TestCanonicalBodyIsNotCopied: the canonical form of a canonical body is
// the body itself, verified without allocating.
func TestCanonicalBodyIsNotCopied(t *testing.T) {
	body := []byte(`{"op":"bench","payload":"xxxxxxxx","price":12.25,"seq":42,"tags":{"a":[1,2,3]}}`)
	canonical, err := Canonicalize(body)
	if err != nil || &canonical[0] != &body[0] || len(canonical) != len(body) {
		t.Fatalf("Canonicalize returned %q, %v; want the body itself", canonical, err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Canonicalize(body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Canonicalize of a canonical body: %v allocations, want 0", allocs)
	}
	if _, err := Key("s", 1, "t", body); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = Key("s", 1, "t", body) }); allocs > 1 {
		t.Errorf("Key of a canonical body: %v allocations, want at most 1 (the hex key)", allocs)
	}
}

func TestAppendES6MatchesJCS(t *testing.T) {
	for _, f := range []float64{1, -1, 0.1, 1e21, 1e20, 1e-6, 1e-7, 123.456, 5e-324, math.MaxFloat64, -math.MaxFloat64, 9007199254740993, 1e9, 1.5e-9, 333333333.33333329} {
		want, err := jcs.NumberToJSON(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(appendES6(nil, f)); got != want {
			t.Errorf("appendES6(%v) = %q, jcs %q", f, got, want)
		}
	}
}

// FuzzFastPath is the differential check of the fast path against the
// general one (jcs.Transform, then the classifying parser): whenever the
// fast path accepts an input, jcs gives the input back unchanged and the
// tree is json.Decoder's; whatever jcs accepts, its output passes the fast
// path (so SDK bodies always take it); and Canonicalize's result, bytes or
// error text, is the general path's.
//
//	go test -run '^$' -fuzz FuzzFastPath -fuzztime 20s ./keyderive/
func FuzzFastPath(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add([]byte(v.Args))
	}
	for _, seed := range []string{`{}`, `{"a":1,"b":[1.5,"x\n"]}`, `{"b":1,"a":2}`, `1e+21`, `-0`, `"\u001f"`, `{"` + "😀" + `":1,"` + "\ue000" + `":2}`, `{"a":1,"a":2}`, `[1e400]`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		_, fastOK := scanCanonical(input, false)
		tree, treeOK := scanCanonical(input, true)
		if fastOK != treeOK {
			t.Fatalf("scanCanonical(%q): %v without tree, %v with", input, fastOK, treeOK)
		}
		general, generalErr := canonicalizeGeneral(input)
		public, publicErr := Canonicalize(input)
		switch {
		case (generalErr == nil) != (publicErr == nil):
			t.Fatalf("Canonicalize error %v, general path error %v", publicErr, generalErr)
		case generalErr != nil && generalErr.Error() != publicErr.Error():
			t.Fatalf("Canonicalize error %q, general path error %q", publicErr, generalErr)
		case !bytes.Equal(general, public):
			t.Fatalf("Canonicalize = %q, general path %q", public, general)
		}
		if fastOK {
			if generalErr != nil || !bytes.Equal(general, input) {
				t.Fatalf("fast path accepted %q, but its canonical form is %q, %v", input, general, generalErr)
			}
			if !reflect.DeepEqual(tree, decodeWithUseNumber(t, input)) {
				t.Fatalf("fast tree of %q = %#v, json.Decoder's differs", input, tree)
			}
		}
		if generalErr != nil {
			return
		}
		canonicalTree, ok := scanCanonical(general, true)
		if !ok {
			t.Fatalf("jcs output %q does not pass the fast path", general)
		}
		if !reflect.DeepEqual(canonicalTree, decodeWithUseNumber(t, general)) {
			t.Fatalf("fast tree of %q differs from json.Decoder's", general)
		}
		value, canonical, err := DecodeCanonical(input)
		if err != nil || !bytes.Equal(canonical, general) || !reflect.DeepEqual(value, canonicalTree) {
			t.Fatalf("DecodeCanonical(%q) = %q, %v", input, canonical, err)
		}
	})
}

// FuzzAppendES6 checks the allocation-free number spelling against jcs's.
func FuzzAppendES6(f *testing.F) {
	for _, seed := range []float64{0, 1, -1.5, 1e21, 1e-7, 5e-324, math.MaxFloat64} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return
		}
		want, err := jcs.NumberToJSON(x)
		if err != nil {
			t.Fatalf("jcs.NumberToJSON(%v): %v", x, err)
		}
		if got := string(appendES6(nil, x)); got != want {
			t.Fatalf("appendES6(%v) = %q, jcs %q", x, got, want)
		}
	})
}
