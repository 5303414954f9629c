package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// DefaultInputSchema is the input schema of a tool that declares none: any
// JSON object. Discovery shows it, and validation applies it.
const DefaultInputSchema = `{"type":"object"}`

// Schema is a tool's input schema, compiled once at start-up.
type Schema struct {
	raw      json.RawMessage
	compiled *jsonschema.Schema
	// anyObject: the schema accepts every object (DefaultInputSchema, or
	// an empty schema), so validation needs no value tree.
	anyObject bool
	// accept is the quick "certainly valid" check (fastschema.go), nil
	// when the schema uses keywords it does not evaluate.
	accept *acceptSchema
}

// Violation is one way in which a call's arguments fail the tool's input
// schema. The gateway returns every violation of a call in the errors member
// of its 400 invalid_arguments problem.
type Violation struct {
	// Location is a JSON Pointer (RFC 6901) into the arguments; "" is the root.
	Location string `json:"location"`
	// Message says what is wrong there.
	Message string `json:"message"`
}

// CompileSchema compiles the JSON Schema raw of the tool called name. An empty
// raw means DefaultInputSchema. The draft is 2020-12 unless the schema names
// another with $schema (draft-04, -06, -07 and 2019-09 are known). Formats
// ("format": "email", ...) are asserted in every draft, because a schema
// author who writes one expects it enforced. References must stay inside the
// schema ($defs): the gateway never loads a $ref from a file or the network.
// The error names the tool and, for a schema that breaks its meta-schema,
// lists where.
func CompileSchema(name string, raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(DefaultInputSchema)
	}
	// A tool-specific URL makes error messages and relative $refs point at
	// the tool; nothing is ever fetched from it.
	location := "toolgateway:///schemas/" + url.PathEscape(name) + ".json"
	compiler := jsonschema.NewCompiler()
	compiler.Draft = jsonschema.Draft2020
	compiler.AssertFormat = true
	compiler.LoadURL = func(ref string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("$ref or $schema %q is not available: schemas must be self-contained (put shared parts under $defs)", ref)
	}
	if err := compiler.AddResource(location, bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("tool %q: input schema is not valid JSON: %w", name, err)
	}
	compiled, err := compiler.Compile(location)
	if err != nil {
		return nil, fmt.Errorf("tool %q: invalid input schema: %s", name, describeSchemaError(err))
	}
	trimmed := string(bytes.TrimSpace(raw))
	return &Schema{raw: append(json.RawMessage(nil), raw...), compiled: compiled,
		anyObject: trimmed == DefaultInputSchema || trimmed == "{}" || trimmed == "true",
		accept:    newAcceptSchema(compiled)}, nil
}

// AcceptsAnyObject reports whether every JSON object is valid against the
// schema (DefaultInputSchema, {} or true, as written): a caller that knows
// its arguments are an object can then skip decoding them for Validate.
// A nil Schema accepts any object too (see Validate).
func (s *Schema) AcceptsAnyObject() bool {
	return s == nil || s.compiled == nil || s.anyObject
}

// describeSchemaError turns a compilation failure into one line. A schema
// that breaks its meta-schema lists every leaf violation with its location in
// the schema, which is what the author needs to fix it.
func describeSchemaError(err error) string {
	var invalid *jsonschema.ValidationError
	if errors.As(err, &invalid) {
		parts := make([]string, 0, 4)
		for _, v := range flatten(invalid) {
			parts = append(parts, fmt.Sprintf("at %q: %s", v.Location, v.Message))
		}
		return "does not conform to its meta-schema: " + strings.Join(parts, "; ")
	}
	var schemaErr *jsonschema.SchemaError
	if errors.As(err, &schemaErr) && schemaErr.Err != nil {
		return strings.TrimPrefix(schemaErr.Err.Error(), "jsonschema: ")
	}
	return err.Error()
}

// Raw returns the schema text as configured (DefaultInputSchema when none
// was). Callers must not modify it.
func (s *Schema) Raw() json.RawMessage {
	return s.raw
}

// Validate checks decoded arguments (decode them with json.Decoder.UseNumber
// so that large numbers keep their precision) and returns every violation,
// sorted by location, or nil when they are valid. Arguments that are not a
// JSON object are one violation at the root, whatever the schema says: a tool
// call's arguments are always an object.
func (s *Schema) Validate(args any) []Violation {
	if _, ok := args.(map[string]any); !ok {
		return []Violation{{Location: "", Message: "arguments must be a JSON object, not " + jsonTypeName(args)}}
	}
	if s == nil || s.compiled == nil {
		return nil
	}
	if s.accept != nil && s.accept.accepts(args) {
		return nil // certainly valid: jsonschema would find nothing
	}
	err := s.compiled.Validate(args)
	if err == nil {
		return nil
	}
	var invalid *jsonschema.ValidationError
	if errors.As(err, &invalid) {
		return flatten(invalid)
	}
	// InfiniteLoopError or InvalidJSONTypeError: the schema or the caller is
	// broken, but the arguments are still not accepted.
	return []Violation{{Location: "", Message: err.Error()}}
}

// ValidateJSON decodes raw JSON arguments with UseNumber and validates them.
// The error is for text that is not JSON; violations are not errors.
func (s *Schema) ValidateJSON(raw []byte) ([]Violation, error) {
	args, err := DecodeArguments(raw)
	if err != nil {
		return nil, err
	}
	return s.Validate(args), nil
}

// DecodeArguments decodes one JSON value the way validation expects it:
// numbers as json.Number, nothing after the value.
func DecodeArguments(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode arguments: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decode arguments: data after the JSON value")
	}
	return v, nil
}

// flatten reduces jsonschema's tree of errors to its leaves, the causes a
// client can act on, sorted by location then message, without duplicates
// (the same leaf can be reached through several $refs).
func flatten(root *jsonschema.ValidationError) []Violation {
	var out []Violation
	seen := make(map[Violation]bool)
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			v := Violation{Location: e.InstanceLocation, Message: e.Message}
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
			return
		}
		for _, cause := range e.Causes {
			walk(cause)
		}
	}
	walk(root)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Location != out[j].Location {
			return out[i].Location < out[j].Location
		}
		return out[i].Message < out[j].Message
	})
	return out
}

// jsonTypeName names the JSON type of a decoded value, for messages.
func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64, float32, int, int64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}
