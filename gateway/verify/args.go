package verify

import (
	"encoding/json"
	"fmt"
	"sort"
)

// makeArgs builds valid arguments for a tool from its JSON Schema: the
// required members of common types, varied by seed so that two seeds give
// two different calls. A schema it cannot satisfy with certainty (oneOf,
// patterns, references, ...) is an error that says why: the guarantees
// needing arguments are then N/A for that tool, never guessed.
func makeArgs(schema json.RawMessage, seed int) ([]byte, error) {
	var s map[string]any
	if len(schema) > 0 {
		if err := json.Unmarshal(schema, &s); err != nil {
			return nil, fmt.Errorf("its input schema is not a JSON object: %w", err)
		}
	}
	v, err := argValue(s, seed, 0)
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = map[string]any{}
	}
	return json.Marshal(v)
}

// unsupportedKeywords are the schema keywords the generator does not try to
// satisfy.
var unsupportedKeywords = []string{"oneOf", "anyOf", "allOf", "not", "$ref", "pattern", "format", "if", "const", "dependentRequired", "patternProperties", "minItems", "minProperties", "multipleOf"}

func argValue(s map[string]any, seed, depth int) (any, error) {
	if depth > 8 {
		return nil, fmt.Errorf("its input schema nests deeper than 8 levels")
	}
	for _, k := range unsupportedKeywords {
		if _, ok := s[k]; ok {
			return nil, fmt.Errorf("its input schema uses %q, which verify does not generate arguments for", k)
		}
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[seed%len(enum)], nil
	}
	typ, _ := s["type"].(string)
	switch typ {
	case "", "object":
		return argObject(s, seed, depth)
	case "string":
		str := fmt.Sprintf("verify-%d", seed)
		if maxLen, ok := s["maxLength"].(float64); ok && int(maxLen) < len(str) {
			return nil, fmt.Errorf("its input schema has a string shorter than %d characters", len(str))
		}
		return str, nil
	case "integer", "number":
		n := float64(seed + 1)
		if lo, ok := s["minimum"].(float64); ok {
			n += lo
		}
		if hi, ok := s["maximum"].(float64); ok && n > hi {
			return nil, fmt.Errorf("its input schema has a number range too narrow to vary")
		}
		return n, nil
	case "boolean":
		return seed%2 == 0, nil
	case "array":
		return []any{}, nil
	}
	return nil, fmt.Errorf("its input schema has type %v, which verify does not generate", s["type"])
}

// argObject fills the required members; with none, it adds the seed as
// an optional member when the schema allows extra members, so that two
// seeds still differ.
func argObject(s map[string]any, seed, depth int) (any, error) {
	props, _ := s["properties"].(map[string]any)
	out := map[string]any{}
	var required []string
	for _, r := range asList(s["required"]) {
		if name, ok := r.(string); ok {
			required = append(required, name)
		}
	}
	sort.Strings(required)
	for _, name := range required {
		sub, _ := props[name].(map[string]any)
		v, err := argValue(sub, seed, depth+1)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	if len(required) == 0 && depth == 0 {
		if extra, ok := s["additionalProperties"].(bool); !ok || extra {
			out["verify_seed"] = seed
		}
	}
	return out, nil
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
