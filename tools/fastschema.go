package tools

import (
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// A quick acceptance check for the common, simple schemas. jsonschema/v5
// allocates on every keyword it evaluates (an error closure, location
// strings, a map of unevaluated properties per object, a big.Rat per
// number) whether the arguments are valid or not, which made schema
// validation the largest single cost of a call. Nearly every call is valid,
// so acceptSchema answers only "certainly valid": it is built from the
// compiled schema only when that uses nothing but the keywords below
// (types, properties, required, additionalProperties, items, sizes,
// lengths, patterns, integer bounds, string enums, boolean schemas), and it answers
// false whenever it is not sure (a number that is not a plain integer, a
// value of a type it does not know). false is never a verdict: Validate
// then runs jsonschema, which finds the violations and words them. So the
// violations and their messages are jsonschema's, always; the fast check
// can only skip validations that would have found none
// (TestAcceptSchemaNeverAcceptsWhatJSONSchemaRejects, FuzzAcceptSchema).
type acceptSchema struct {
	always *bool // a boolean schema

	types         []string
	strEnum       []string
	hasEnum       bool
	required      []string
	properties    map[string]*acceptSchema
	additional    *acceptSchema // nil: any additional property
	noAdditional  bool          // additionalProperties: false
	items         *acceptSchema
	minProperties int
	maxProperties int
	minItems      int
	maxItems      int
	minLength     int
	maxLength     int
	pattern       *regexp.Regexp // jsonschema's own compiled pattern
	// Integer bounds; has* says whether each is set.
	minimum, exclusiveMinimum, maximum, exclusiveMaximum             int64
	hasMinimum, hasExclusiveMinimum, hasMaximum, hasExclusiveMaximum bool
}

// handledFields are the jsonschema.Schema fields acceptSchema evaluates or
// may ignore (annotations, and fields that only matter together with a
// keyword that is declined). Any other field that is set makes
// newAcceptSchema decline the schema: a keyword added to jsonschema later
// is declined, not silently skipped.
var handledFields = map[string]bool{
	// Evaluated.
	"Always": true, "Types": true, "Enum": true, "enumError": true, "Required": true,
	"Properties": true, "AdditionalProperties": true, "Items": true, "Items2020": true,
	"MinProperties": true, "MaxProperties": true, "MinItems": true, "MaxItems": true,
	"MinLength": true, "MaxLength": true, "Pattern": true,
	"Minimum": true, "ExclusiveMinimum": true, "Maximum": true, "ExclusiveMaximum": true,
	// Annotations and bookkeeping: no effect on validity.
	"Location": true, "Draft": true, "meta": true, "vocab": true, "dynamicAnchors": true,
	"RecursiveAnchor": true, "DynamicAnchor": true,
	"Title": true, "Description": true, "Default": true, "Comment": true,
	"ReadOnly": true, "WriteOnly": true, "Examples": true, "Deprecated": true,
	// Used only with Contains, which must be unset.
	"ContainsEval": true, "MinContains": true, "MaxContains": true,
}

// newAcceptSchema builds the quick check of s, or nil when s uses anything
// it does not evaluate.
func newAcceptSchema(s *jsonschema.Schema) *acceptSchema {
	a, ok := buildAccept(s, 0)
	if !ok {
		return nil
	}
	return a
}

// maxAcceptDepth bounds the schema nesting the quick check is built for.
const maxAcceptDepth = 32

func buildAccept(s *jsonschema.Schema, depth int) (*acceptSchema, bool) {
	if s == nil || depth > maxAcceptDepth {
		return nil, false
	}
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := range t.NumField() {
		if !handledFields[t.Field(i).Name] && !v.Field(i).IsZero() {
			return nil, false
		}
	}
	a := &acceptSchema{
		always: s.Always, types: s.Types, required: s.Required,
		minProperties: s.MinProperties, maxProperties: s.MaxProperties,
		minItems: s.MinItems, maxItems: s.MaxItems, minLength: s.MinLength, maxLength: s.MaxLength,
		pattern: s.Pattern,
	}
	if len(s.Enum) > 0 {
		a.hasEnum = true
		for _, e := range s.Enum {
			str, ok := e.(string)
			if !ok {
				return nil, false
			}
			a.strEnum = append(a.strEnum, str)
		}
	}
	if len(s.Properties) > 0 {
		a.properties = make(map[string]*acceptSchema, len(s.Properties))
		for name, sub := range s.Properties {
			child, ok := buildAccept(sub, depth+1)
			if !ok {
				return nil, false
			}
			a.properties[name] = child
		}
	}
	switch ap := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		a.noAdditional = !ap
	case *jsonschema.Schema:
		child, ok := buildAccept(ap, depth+1)
		if !ok {
			return nil, false
		}
		a.additional = child
	default:
		return nil, false
	}
	items := s.Items2020
	switch it := s.Items.(type) {
	case nil:
	case *jsonschema.Schema:
		if items != nil {
			return nil, false
		}
		items = it
	default: // the array form (tuple validation) is declined
		return nil, false
	}
	if items != nil {
		child, ok := buildAccept(items, depth+1)
		if !ok {
			return nil, false
		}
		a.items = child
	}
	var ok bool
	if a.minimum, a.hasMinimum, ok = intBound(s.Minimum); !ok {
		return nil, false
	}
	if a.exclusiveMinimum, a.hasExclusiveMinimum, ok = intBound(s.ExclusiveMinimum); !ok {
		return nil, false
	}
	if a.maximum, a.hasMaximum, ok = intBound(s.Maximum); !ok {
		return nil, false
	}
	if a.exclusiveMaximum, a.hasExclusiveMaximum, ok = intBound(s.ExclusiveMaximum); !ok {
		return nil, false
	}
	return a, true
}

// intBound converts a numeric bound that is an int64 integer; ok is false
// for any other bound.
func intBound(r *big.Rat) (bound int64, set, ok bool) {
	if r == nil {
		return 0, false, true
	}
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, false, false
	}
	return r.Num().Int64(), true, true
}

// accepts reports whether v is certainly valid; false means "ask
// jsonschema".
func (a *acceptSchema) accepts(v any) bool {
	if a.always != nil {
		return *a.always
	}
	kind, integer, isInteger, known := kindOf(v)
	if !known || !a.typeAccepts(kind, isInteger) || !a.enumAccepts(v) {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		return a.objectAccepts(x)
	case []any:
		return a.arrayAccepts(x)
	case string:
		return a.stringAccepts(x)
	case json.Number:
		return a.numberAccepts(integer, isInteger)
	}
	return true
}

// kindOf names v's JSON type; for a number, also its value when it is a
// plain integer that fits an int64. known is false for Go types jsonschema
// knows and this check does not: let it judge.
func kindOf(v any) (kind string, integer int64, isInteger, known bool) {
	switch x := v.(type) {
	case nil:
		return "null", 0, false, true
	case bool:
		return "boolean", 0, false, true
	case string:
		return "string", 0, false, true
	case []any:
		return "array", 0, false, true
	case map[string]any:
		return "object", 0, false, true
	case json.Number:
		integer, isInteger = plainInteger(x)
		return "number", integer, isInteger, true
	}
	return "", 0, false, false
}

// typeAccepts checks `type` (an integer also matches "integer").
func (a *acceptSchema) typeAccepts(kind string, isInteger bool) bool {
	if len(a.types) == 0 {
		return true
	}
	for _, t := range a.types {
		if t == kind || (t == "integer" && isInteger) {
			return true
		}
	}
	return false
}

// enumAccepts checks a string `enum`.
func (a *acceptSchema) enumAccepts(v any) bool {
	if !a.hasEnum {
		return true
	}
	s, ok := v.(string)
	return ok && slices.Contains(a.strEnum, s)
}

// objectAccepts checks the property counts, `required`, the properties and
// `additionalProperties`.
func (a *acceptSchema) objectAccepts(x map[string]any) bool {
	if (a.minProperties != -1 && len(x) < a.minProperties) || (a.maxProperties != -1 && len(x) > a.maxProperties) {
		return false
	}
	for _, name := range a.required {
		if _, ok := x[name]; !ok {
			return false
		}
	}
	for name, value := range x {
		if sub, ok := a.properties[name]; ok {
			if !sub.accepts(value) {
				return false
			}
			continue
		}
		if a.noAdditional || (a.additional != nil && !a.additional.accepts(value)) {
			return false
		}
	}
	return true
}

// arrayAccepts checks the item counts and `items`.
func (a *acceptSchema) arrayAccepts(x []any) bool {
	if (a.minItems != -1 && len(x) < a.minItems) || (a.maxItems != -1 && len(x) > a.maxItems) {
		return false
	}
	if a.items != nil {
		for _, item := range x {
			if !a.items.accepts(item) {
				return false
			}
		}
	}
	return true
}

// stringAccepts checks the length in code points and `pattern`.
func (a *acceptSchema) stringAccepts(x string) bool {
	if a.minLength != -1 || a.maxLength != -1 {
		n := utf8.RuneCountInString(x)
		if (a.minLength != -1 && n < a.minLength) || (a.maxLength != -1 && n > a.maxLength) {
			return false
		}
	}
	return a.pattern == nil || a.pattern.MatchString(x)
}

// numberAccepts checks integer bounds; a bound on a number that is not a
// plain integer is jsonschema's to judge.
func (a *acceptSchema) numberAccepts(integer int64, isInteger bool) bool {
	if !a.hasMinimum && !a.hasExclusiveMinimum && !a.hasMaximum && !a.hasExclusiveMaximum {
		return true
	}
	if !isInteger {
		return false
	}
	return !((a.hasMinimum && integer < a.minimum) || (a.hasExclusiveMinimum && integer <= a.exclusiveMinimum) ||
		(a.hasMaximum && integer > a.maximum) || (a.hasExclusiveMaximum && integer >= a.exclusiveMaximum))
}

// plainInteger parses n when it is written as an optionally negative run
// of at most 18 digits (so it fits an int64 exactly); ok is false for any
// other spelling, integer-valued or not (1.0, 1e3).
func plainInteger(n json.Number) (int64, bool) {
	s := string(n)
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil || i == math.MinInt64 {
		return 0, false
	}
	return i, true
}
