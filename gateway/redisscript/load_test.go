package redisscript

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/redis/go-redis/v9"
)

// TestMustLoadAndTexts: MustLoad gives the named file's script, Texts every
// script of lua/ by name (nothing outside it); a missing script panics.
func TestMustLoadAndTexts(t *testing.T) {
	fsys := fstest.MapFS{
		"lua/incr.lua":  {Data: []byte("local k = KEYS[1]\nreturn redis.call('INCR', k)\n")},
		"lua/get.lua":   {Data: []byte("local k = KEYS[1]\nreturn redis.call('GET', k)\n")},
		"lua/notes.txt": {Data: []byte("not a script")},
		"other.lua":     {Data: []byte("return 1")},
	}
	if got, want := MustLoad(fsys, "incr").Hash(), redis.NewScript(string(fsys["lua/incr.lua"].Data)).Hash(); got != want {
		t.Errorf("MustLoad(incr) hash %s, want the file's %s", got, want)
	}
	texts, err := Texts(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) != 2 || texts["get"] != string(fsys["lua/get.lua"].Data) || texts["incr"] == "" {
		t.Errorf("Texts = %v, want incr and get only", texts)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustLoad of a missing script did not panic")
		}
	}()
	MustLoad(fsys, "missing")
}

// TestIncludes: a `--#include name` line is lua/include/name.lua in the
// loaded and listed text (the hash is of the whole text Redis runs); a
// piece that is not there is an error naming it, and MustLoad panics.
func TestIncludes(t *testing.T) {
	piece := "local function twice(n) return 2 * n end\n"
	fsys := fstest.MapFS{
		"lua/double.lua":        {Data: []byte("local k = KEYS[1]\n--#include twice\nreturn twice(redis.call('INCR', k))\n")},
		"lua/include/twice.lua": {Data: []byte(piece)},
	}
	want := "local k = KEYS[1]\n" + piece + "return twice(redis.call('INCR', k))\n"
	if got := MustLoad(fsys, "double").Hash(); got != redis.NewScript(want).Hash() {
		t.Errorf("MustLoad(double) hash %s, want the expanded text's", got)
	}
	texts, err := Texts(fsys)
	if err != nil || len(texts) != 1 || texts["double"] != want {
		t.Fatalf("Texts = %q, %v; want only double, expanded to %q", texts, err, want)
	}
	delete(fsys, "lua/include/twice.lua")
	if _, err := Texts(fsys); err == nil || !strings.Contains(err.Error(), "include twice") {
		t.Errorf("Texts with the piece missing: %v, want an error naming it", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustLoad with a missing include did not panic")
		}
	}()
	MustLoad(fsys, "double")
}
