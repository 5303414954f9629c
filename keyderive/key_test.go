package keyderive

import (
	"errors"
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
