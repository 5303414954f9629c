package keyderive

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestKeyValidatesInputs(t *testing.T) {
	args := []byte(`{}`)
	cases := []struct {
		name    string
		session string
		step    uint64
		tool    string
		want    error
	}{
		{"empty session", "", 0, "t", ErrInvalidSession},
		{"session with colon", "a:b", 0, "t", ErrInvalidSession},
		{"session with space", "a b", 0, "t", ErrInvalidSession},
		{"session with DEL", "a\x7f", 0, "t", ErrInvalidSession},
		{"session non-ASCII", "é", 0, "t", ErrInvalidSession},
		{"session 257 chars", strings.Repeat("s", 257), 0, "t", ErrInvalidSession},
		{"step 2^53", "s", MaxStepIndex + 1, "t", ErrInvalidStep},
		{"empty tool", "s", 0, "", ErrInvalidTool},
		{"tool uppercase", "s", 0, "Tool", ErrInvalidTool},
		{"tool leading dash", "s", 0, "-t", ErrInvalidTool},
		{"tool leading underscore", "s", 0, "_t", ErrInvalidTool},
		{"tool with dot", "s", 0, "a.b", ErrInvalidTool},
		{"tool 65 chars", "s", 0, strings.Repeat("t", 65), ErrInvalidTool},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Key(tc.session, tc.step, tc.tool, args); !errors.Is(err, tc.want) {
				t.Errorf("Key error = %v, want %v", err, tc.want)
			}
			if _, err := KeyFromCanonical(tc.session, tc.step, tc.tool, args); !errors.Is(err, tc.want) {
				t.Errorf("KeyFromCanonical error = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Key(strings.Repeat("s", 256), MaxStepIndex, strings.Repeat("t", 64), args); err != nil {
		t.Errorf("Key at every limit: %v", err)
	}
}

func TestParseStepIndex(t *testing.T) {
	good := map[string]uint64{"0": 0, "4": 4, "10": 10, "9007199254740991": MaxStepIndex}
	for text, want := range good {
		if got, err := ParseStepIndex(text); err != nil || got != want {
			t.Errorf("ParseStepIndex(%q) = %d, %v; want %d", text, got, err, want)
		}
	}
	for _, text := range []string{"", "01", "00", "+1", "-1", " 1", "1 ", "1.0", "1e3", "9007199254740992", "99999999999999999999", "０"} {
		if _, err := ParseStepIndex(text); !errors.Is(err, ErrInvalidStep) {
			t.Errorf("ParseStepIndex(%q) error = %v, want ErrInvalidStep", text, err)
		}
	}
}

func TestKeyIgnoresFormatting(t *testing.T) {
	a, err := Key("s", 4, "provision-infra", []byte(`{"size":"m5.large","count":3,"tags":{"b":1,"a":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Key("s", 4, "provision-infra", []byte("{\n  \"tags\": {\"a\": 2.0, \"b\": 1e0},\n  \"count\": 3,\n  \"size\": \"m5.large\"\n}"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("keys differ for the same arguments: %s vs %s", a, b)
	}
	// Every other input changes the key.
	for _, other := range []struct {
		session, tool string
		step          uint64
		args          string
	}{
		{"s2", "provision-infra", 4, `{"size":"m5.large","count":3,"tags":{"b":1,"a":2}}`},
		{"s", "provision-infra", 5, `{"size":"m5.large","count":3,"tags":{"b":1,"a":2}}`},
		{"s", "provision-infra2", 4, `{"size":"m5.large","count":3,"tags":{"b":1,"a":2}}`},
		{"s", "provision-infra", 4, `{"size":"m5.large","count":4,"tags":{"b":1,"a":2}}`},
	} {
		c, err := Key(other.session, other.step, other.tool, []byte(other.args))
		if err != nil || c == a {
			t.Errorf("Key(%+v) = %s, %v; want a different key", other, c, err)
		}
	}
}

// benchmarkArgs builds a realistic pretty-printed arguments object of about
// size bytes: an array of records with strings, numbers, booleans and a
// nested object, members written out of canonical order.
func benchmarkArgs(size int) []byte {
	var b strings.Builder
	b.WriteString("{\n  \"region\": \"eu-west-1\",\n  \"dry_run\": false,\n  \"items\": [")
	for i := 0; b.Len() < size-40; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n    {\"name\": \"item-%d\", \"price\": %d.25, \"tags\": {\"team\": \"agents\", \"tier\": %d}, \"active\": true}", i, i*7, i%3)
	}
	b.WriteString("\n  ]\n}")
	return []byte(b.String())
}

// benchmarkCanonicalArgs is benchmarkArgs already in canonical form, as
// every SDK sends it (the fast path).
func benchmarkCanonicalArgs(b *testing.B, size int) []byte {
	canonical, err := Canonicalize(benchmarkArgs(size))
	if err != nil {
		b.Fatal(err)
	}
	return append([]byte(nil), canonical...)
}

func benchmarkKey(b *testing.B, size int, canonical bool) {
	args := benchmarkArgs(size)
	if canonical {
		args = benchmarkCanonicalArgs(b, size)
	}
	if _, err := Key("sess-01J8ZK4Q7XKZ3V9W6T2R5M0ABC", 4, "provision-infra", args); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Key("sess-01J8ZK4Q7XKZ3V9W6T2R5M0ABC", 4, "provision-infra", args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKey(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"200B", 200}, {"4KiB", 4 << 10}, {"256KiB", 256 << 10}} {
		b.Run(size.name, func(b *testing.B) { benchmarkKey(b, size.bytes, false) })
		b.Run(size.name+"-canonical", func(b *testing.B) { benchmarkKey(b, size.bytes, true) })
	}
}

// BenchmarkDecode measures the per-request parse (value tree and
// canonical bytes) for the same argument sizes, pretty-printed and already
// canonical.
func BenchmarkDecode(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"200B", 200}, {"4KiB", 4 << 10}, {"256KiB", 256 << 10}} {
		for _, canonical := range []bool{false, true} {
			name := size.name
			if canonical {
				name += "-canonical"
			}
			b.Run(name, func(b *testing.B) {
				args := benchmarkArgs(size.bytes)
				if canonical {
					args = benchmarkCanonicalArgs(b, size.bytes)
				}
				b.SetBytes(int64(len(args)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := Decode(args); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// vector is one entry of testdata/vectors.json (contract section 8).
type vector struct {
	Name      string `json:"name"`
	SessionID string `json:"session_id"`
	StepIndex uint64 `json:"step_index"`
	Tool      string `json:"tool"`
	Args      string `json:"args"`
	Canonical string `json:"canonical"`
	Key       string `json:"key"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	data, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var vectors []vector
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatalf("parse vectors: %v", err)
	}
	return vectors
}

func TestVectors(t *testing.T) {
	vectors := loadVectors(t)
	if len(vectors) < 40 {
		t.Fatalf("vectors.json has %d vectors, want at least 40", len(vectors))
	}
	names := map[string]bool{}
	for _, v := range vectors {
		if names[v.Name] {
			t.Fatalf("duplicate vector name %q", v.Name)
		}
		names[v.Name] = true
		t.Run(v.Name, func(t *testing.T) {
			canonical, err := Canonicalize([]byte(v.Args))
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if string(canonical) != v.Canonical {
				t.Errorf("canonical\n got %s\nwant %s", canonical, v.Canonical)
			}
			key, err := Key(v.SessionID, v.StepIndex, v.Tool, []byte(v.Args))
			if err != nil {
				t.Fatalf("Key: %v", err)
			}
			if key != v.Key {
				t.Errorf("key = %s, want %s", key, v.Key)
			}
			value, decoded, err := Decode([]byte(v.Args))
			if err != nil || string(decoded) != v.Canonical {
				t.Fatalf("Decode = %s, %v; want the canonical bytes", decoded, err)
			}
			if _, isObject := value.(map[string]any); !isObject {
				t.Errorf("Decode value is %T, want map[string]any", value)
			}
			// The classifying parser (used to explain rejections) accepts it too.
			if slow, err := parseIJSON([]byte(v.Args), true); err != nil || !reflect.DeepEqual(slow, value) {
				t.Errorf("parseIJSON = %#v, %v; want %#v", slow, err, value)
			}
			fromCanonical, err := KeyFromCanonical(v.SessionID, v.StepIndex, v.Tool, decoded)
			if err != nil || fromCanonical != v.Key {
				t.Errorf("KeyFromCanonical = %s, %v; want %s", fromCanonical, err, v.Key)
			}
			// Canonical text is a fixed point.
			again, err := Canonicalize(canonical)
			if err != nil || string(again) != string(canonical) {
				t.Errorf("Canonicalize(canonical) = %s, %v", again, err)
			}
		})
	}
}
