package gatewaycmd

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yamlUnmarshaler is the interface of a type that decodes itself (such as
// Duration): its own UnmarshalYAML judges the value.
var yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// refuseFractions walks the YAML document n beside the Go type t it
// decodes into and refuses a number with a fraction (or not finite) where
// t has an integer field. yaml.v3 truncates such a number without a word
// (burst: 0.5 would become 0, which means "the default"; max_in_flight:
// 0.9 would become 0, "no cap"), so the check has to be ours. path is the
// field's name so far; the error names the line and the field, e.g.
// "line 9: auth.tenants[0].burst: 0.5 is not a whole number".
func refuseFractions(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(yamlUnmarshaler) {
		return nil
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := refuseFractions(c, t, path); err != nil {
				return err
			}
		}
	case yaml.AliasNode:
		return refuseFractions(n.Alias, t, path)
	case yaml.MappingNode:
		return refuseFractionsIn(n, t, path)
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil
		}
		for i, c := range n.Content {
			if err := refuseFractions(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		return refuseFraction(n, t, path)
	}
	return nil
}

// refuseFractionsIn is refuseFractions for a mapping: a struct's fields by
// their yaml names, or a map's values.
func refuseFractionsIn(n *yaml.Node, t reflect.Type, path string) error {
	var fields map[string]reflect.Type
	switch t.Kind() {
	case reflect.Struct:
		fields = yamlFields(t)
	case reflect.Map:
	default:
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i].Value, n.Content[i+1]
		ft := t
		if fields != nil {
			var ok bool
			if ft, ok = fields[key]; !ok {
				continue // unknown fields are the decoder's to refuse
			}
		} else {
			ft = t.Elem()
		}
		if err := refuseFractions(value, ft, strings.TrimPrefix(path+"."+key, ".")); err != nil {
			return err
		}
	}
	return nil
}

// refuseFraction refuses a float scalar with a fraction for an integer t.
func refuseFraction(n *yaml.Node, t reflect.Type, path string) error {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return nil
	}
	if n.ShortTag() != "!!float" {
		return nil
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	if err == nil && f == math.Trunc(f) && !math.IsInf(f, 0) {
		return nil // 2.0 or 1e3: a whole number, decoded exactly
	}
	return fmt.Errorf("line %d: %s: %s is not a whole number", n.Line, path, n.Value)
}

// yamlFields maps the yaml names of t's fields to their types as yaml.v3
// names them: the tag's name, else the lowercased field name; an inline
// struct's fields as the struct's own.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
			continue
		case strings.Contains(opts, "inline"):
			for k, v := range yamlFields(f.Type) {
				fields[k] = v
			}
			continue
		case name == "":
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields
}
