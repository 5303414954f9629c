package redisscript

import (
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
