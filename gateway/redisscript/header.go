package redisscript

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
)

// Args is a script's ARGV as a typed struct: each field's lua tag is the
// name the script's header gives that argument (`local <name> = ARGV[i]`),
// fields in the header's order (embedded structs flattened), and Argv
// lists the field values in that order, ready for [Call].Args.
type Args interface {
	Argv() []any
}

var (
	headerArg = regexp.MustCompile(`(?m)^local (\w+) = (?:tonumber\()?ARGV\[(\d+)\]`)
	headerKey = regexp.MustCompile(`(?m)^local (\w+) = KEYS\[(\d+)\]`)
	anyArg    = regexp.MustCompile(`ARGV\[`)
	anyKey    = regexp.MustCompile(`KEYS\[`)
)

// CheckHeader reports how script (a Lua text) and args disagree: the
// script must name each KEYS and ARGV entry once, at its top
// (`local <name> = KEYS[i]`, `local <name> = ARGV[i]` or
// `local <name> = tonumber(ARGV[i])`), in order, and read them nowhere
// else; args's lua tags must be the ARGV names in that order, and its Argv
// must list the fields in that order. The scripts' tests call it, so a
// renamed or reordered argument fails a test rather than a call.
func CheckHeader(script string, args Args) error {
	var errs []error
	var header []string
	for i, m := range headerArg.FindAllStringSubmatch(script, -1) {
		if m[2] != strconv.Itoa(i+1) {
			errs = append(errs, fmt.Errorf("%s is ARGV[%s], want ARGV[%d] (in order)", m[1], m[2], i+1))
		}
		header = append(header, m[1])
	}
	if n := len(anyArg.FindAllString(script, -1)); n != len(header) {
		errs = append(errs, fmt.Errorf("reads ARGV %d times, %d of them in its header: name every argument once at the top", n, len(header)))
	}
	keys := headerKey.FindAllStringSubmatch(script, -1)
	for i, m := range keys {
		if m[2] != strconv.Itoa(i+1) {
			errs = append(errs, fmt.Errorf("%s is KEYS[%s], want KEYS[%d]", m[1], m[2], i+1))
		}
	}
	if n := len(anyKey.FindAllString(script, -1)); n != len(keys) || len(keys) == 0 {
		errs = append(errs, fmt.Errorf("reads KEYS %d times, %d of them in its header", n, len(keys)))
	}
	typ := reflect.TypeOf(args)
	if typ.Kind() == reflect.Pointer { // Argv on a pointer receiver
		typ = typ.Elem()
	}
	if tags := luaNames(typ); !reflect.DeepEqual(tags, header) && (len(tags) != 0 || len(header) != 0) {
		errs = append(errs, fmt.Errorf("names ARGV %v; %s's lua tags are %v", header, typ.Name(), tags))
	}
	errs = append(errs, checkArgvOrder(typ))
	return errors.Join(errs...)
}

// luaNames are the lua tags of t's fields, embedded structs flattened, in
// field order.
func luaNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			names = append(names, luaNames(f.Type)...)
			continue
		}
		names = append(names, f.Tag.Get("lua"))
	}
	return names
}

// checkArgvOrder fills every field of a new typ with a value that names
// its position and reads Argv's order back.
func checkArgvOrder(typ reflect.Type) error {
	ptr := reflect.New(typ)
	v := ptr.Elem()
	n := 0
	if err := distinct(v, &n); err != nil {
		return fmt.Errorf("%s: %w", typ.Name(), err)
	}
	argv, ok := v.Interface().(Args)
	if !ok { // Argv on a pointer receiver
		argv = ptr.Interface().(Args)
	}
	got := argv.Argv()
	if len(got) != n {
		return fmt.Errorf("%s.Argv() lists %d values, the struct has %d fields", typ.Name(), len(got), n)
	}
	var errs []error
	for i, a := range got {
		if p := reflect.ValueOf(a); p.Kind() == reflect.Pointer { // a pointer to a field: its value
			a = p.Elem().Interface()
		}
		if s := fmt.Sprint(a); s != strconv.Itoa(i+1) && s != fmt.Sprint([]byte(strconv.Itoa(i+1))) {
			errs = append(errs, fmt.Errorf("%s.Argv()[%d] = %v, want field %d (the struct's order)", typ.Name(), i, a, i+1))
		}
	}
	return errors.Join(errs...)
}

// distinct sets every field of v to its position (1, 2, ...), embedded
// structs flattened.
func distinct(v reflect.Value, next *int) error {
	for i := range v.NumField() {
		f := v.Field(i)
		if v.Type().Field(i).Anonymous {
			if err := distinct(f, next); err != nil {
				return err
			}
			continue
		}
		*next++
		switch f.Kind() {
		case reflect.String:
			f.SetString(strconv.Itoa(*next))
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(*next))
		case reflect.Slice:
			f.SetBytes([]byte(strconv.Itoa(*next)))
		default:
			return fmt.Errorf("field %s: unsupported kind %s", v.Type().Field(i).Name, f.Kind())
		}
	}
	return nil
}
