package gatewaycmd

import (
	"reflect"
	"strings"
	"testing"
)

// TestFractionsInIntegerFieldsAreRefused: the trial's cases, a number with
// a fraction where the config wants a whole one is refused naming the line
// and the field, instead of yaml.v3's silent truncation (burst: 0.5 was the
// default burst, max_in_flight: 0.9 was no cap at all).
func TestFractionsInIntegerFieldsAreRefused(t *testing.T) {
	tenant := "auth:\n  tenants:\n    - name: a\n      token_sha256: " + strings.Repeat("ab", 32) + "\n      rate: 10/s\n"
	cases := []struct{ config, errorIs string }{
		{tenant + "      burst: 0.5\n", "line 6: auth.tenants[0].burst: 0.5 is not a whole number"},
		{tenant + "      max_in_flight: 0.9\n", "line 6: auth.tenants[0].max_in_flight: 0.9 is not a whole number"},
		{"idempotency:\n  max_body_bytes: 2.5e0\n", "line 2: idempotency.max_body_bytes: 2.5e0 is not a whole number"},
		{"mcp_servers:\n  - name: s\n    url: http://x/mcp\n    sessions: 2.5\n", "line 4: mcp_servers[0].sessions: 2.5 is not a whole number"},
		{"server:\n  max_header_bytes: .inf\n", "line 2: server.max_header_bytes: .inf is not a whole number"},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.config))
		if err == nil || err.Error() != c.errorIs {
			t.Errorf("%q: %v, want %q", c.config, err, c.errorIs)
		}
	}

	// A whole number written as a float decodes exactly, and floats where
	// the config takes any value (a schema's minimum) are left alone.
	cfg, err := ParseConfig([]byte(tenant + "      burst: 2.0\nidempotency:\n  max_body_bytes: 1e6\ntools:\n  - name: t\n    input_schema:\n      type: number\n      minimum: 0.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Auth.Tenants[0].Burst != 2 || cfg.Idempotency.MaxBodyBytes != 1_000_000 || cfg.Tools[0].InputSchema["minimum"] != 0.5 {
		t.Fatalf("burst %d, max_body_bytes %d, schema %v", cfg.Auth.Tenants[0].Burst, cfg.Idempotency.MaxBodyBytes, cfg.Tools[0].InputSchema)
	}
}

// TestEveryIntegerFieldRefusesFractions writes 0.5 into every integer
// field of the config (found from the Config type, so a field added later
// is covered) and wants each refused by its name.
func TestEveryIntegerFieldRefusesFractions(t *testing.T) {
	var paths [][]string
	var walk func(rt reflect.Type, path []string)
	walk = func(rt reflect.Type, path []string) {
		for rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		if reflect.PointerTo(rt).Implements(yamlUnmarshaler) {
			return
		}
		switch rt.Kind() {
		case reflect.Struct:
			for name, ft := range yamlFields(rt) {
				walk(ft, append(append([]string{}, path...), name))
			}
		case reflect.Slice:
			walk(rt.Elem(), append(append([]string{}, path...), "[0]"))
		case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64, reflect.Uint32:
			paths = append(paths, path)
		}
	}
	walk(reflect.TypeFor[Config](), nil)
	if len(paths) < 7 {
		t.Fatalf("found %d integer fields: %v", len(paths), paths)
	}
	for _, path := range paths {
		var doc strings.Builder
		indent := ""
		name := ""
		for i, p := range path {
			last := i == len(path)-1
			switch {
			case p == "[0]":
				name += p
				continue
			case i > 0 && path[i-1] == "[0]":
				doc.WriteString(indent + "- " + p)
				indent += "  "
			default:
				doc.WriteString(indent + p)
			}
			name = strings.TrimPrefix(name+"."+p, ".")
			if last {
				doc.WriteString(": 0.5\n")
			} else {
				doc.WriteString(":\n")
				indent += "  "
			}
		}
		text := doc.String()
		if path[len(path)-1] == "[0]" { // a list of integers: its first item
			text = strings.TrimSuffix(text, ":\n") + ": [0.5]\n"
		}
		_, err := ParseConfig([]byte(text))
		if err == nil || !strings.HasSuffix(err.Error(), ": "+name+": 0.5 is not a whole number") {
			t.Errorf("%s:\n%s→ %v", name, text, err)
		}
	}
}
