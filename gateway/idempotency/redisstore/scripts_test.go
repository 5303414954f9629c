package redisstore

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// scriptArgTypes names each script's ARGV struct.
var scriptArgTypes = map[string]interface{ argv() []any }{
	"claim":        claimArgs{},
	"renew":        renewArgs{},
	"complete":     completeArgs{},
	"mark_unknown": markUnknownArgs{},
	"release":      releaseArgs{},
	"delete":       deleteArgs{},
	"resolve":      resolveArgs{},
	"point":        pointArgs{},
	"layout":       layoutArgs{},
	"approve":      approveArgs{},
}

// scriptTexts are the embedded scripts by name.
func scriptTexts() map[string]string {
	return map[string]string{
		"claim": claimLua, "renew": renewLua, "complete": completeLua, "mark_unknown": markUnknownLua,
		"release": releaseLua, "delete": deleteLua, "resolve": resolveLua, "point": pointLua, "layout": layoutLua,
		"approve": approveLua,
	}
}

var (
	headerArg = regexp.MustCompile(`(?m)^local (\w+) = (?:tonumber\()?ARGV\[(\d+)\]`)
	headerKey = regexp.MustCompile(`(?m)^local (\w+) = KEYS\[(\d+)\]`)
	anyArg    = regexp.MustCompile(`ARGV\[`)
	anyKey    = regexp.MustCompile(`KEYS\[`)
	layoutDef = regexp.MustCompile(`(?m)^local ([A-Z]+) = '([^']*)'$`)
	packCall  = regexp.MustCompile(`struct\.(?:un)?pack\(([^,)]+)`)
)

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

// distinct fills every field of v with a value that names its position, so
// argv's order can be read back.
func distinct(v reflect.Value, next *int) {
	for i := range v.NumField() {
		f := v.Field(i)
		if v.Type().Field(i).Anonymous {
			distinct(f, next)
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
			panic("unexpected field kind " + f.Kind().String())
		}
	}
}

// TestScriptHeaders: every script names each ARGV and KEYS entry once, at
// its top, in order, and reads them nowhere else; its Go struct's lua tags
// are those names in that order, and argv lists the fields in that order.
func TestScriptHeaders(t *testing.T) {
	for name, text := range scriptTexts() {
		args, ok := scriptArgTypes[name]
		if !ok {
			t.Errorf("%s.lua has no ARGV struct in scriptArgTypes", name)
			continue
		}
		var header []string
		for i, m := range headerArg.FindAllStringSubmatch(text, -1) {
			if m[2] != strconv.Itoa(i+1) {
				t.Errorf("%s.lua: %s is ARGV[%s], want ARGV[%d] (in order)", name, m[1], m[2], i+1)
			}
			header = append(header, m[1])
		}
		if n := len(anyArg.FindAllString(text, -1)); n != len(header) {
			t.Errorf("%s.lua reads ARGV %d times, %d of them in its header: name every argument once at the top", name, n, len(header))
		}
		keys := headerKey.FindAllStringSubmatch(text, -1)
		for i, m := range keys {
			if m[2] != strconv.Itoa(i+1) {
				t.Errorf("%s.lua: %s is KEYS[%s], want KEYS[%d]", name, m[1], m[2], i+1)
			}
		}
		if n := len(anyKey.FindAllString(text, -1)); n != len(keys) || len(keys) == 0 {
			t.Errorf("%s.lua reads KEYS %d times, %d of them in its header", name, n, len(keys))
		}
		typ := reflect.TypeOf(args)
		if tags := luaNames(typ); !reflect.DeepEqual(tags, header) && !(len(tags) == 0 && len(header) == 0) {
			t.Errorf("%s.lua names ARGV %v; %s's lua tags are %v", name, header, typ.Name(), tags)
		}
		v := reflect.New(typ).Elem()
		n := 0
		distinct(v, &n)
		got := v.Interface().(interface{ argv() []any }).argv()
		if len(got) != n {
			t.Errorf("%s.argv() lists %d values, the struct has %d fields", typ.Name(), len(got), n)
			continue
		}
		for i, a := range got {
			if s := fmt.Sprint(a); s != strconv.Itoa(i+1) && s != fmt.Sprint([]byte(strconv.Itoa(i+1))) {
				t.Errorf("%s.argv()[%d] = %v, want field %d (the struct's order)", typ.Name(), i, a, i+1)
			}
		}
	}
}

// TestScriptLayouts: every script that reads or writes a record declares
// its layout strings at the top, each equal to record.go's constant, and
// packs or unpacks with those names only (no layout literal inline).
func TestScriptLayouts(t *testing.T) {
	want := map[string]string{"HEAD": layoutHead, "PROGRESS": layoutProgress, "DONE": layoutDone, "STEP": layoutStep, "APPROVAL": layoutApproval}
	for name, text := range scriptTexts() {
		declared := map[string]bool{}
		for _, m := range layoutDef.FindAllStringSubmatch(text, -1) {
			w, ok := want[m[1]]
			if !ok {
				t.Errorf("%s.lua declares an unknown layout %s", name, m[1])
				continue
			}
			if m[2] != w {
				t.Errorf("%s.lua: %s = %q, record.go says %q", name, m[1], m[2], w)
			}
			declared[m[1]] = true
		}
		for _, m := range packCall.FindAllStringSubmatch(text, -1) {
			format := strings.TrimSpace(m[1])
			if !declared[format] {
				t.Errorf("%s.lua packs with %s, not a layout declared at its top", name, format)
			}
		}
	}
}
