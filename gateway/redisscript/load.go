package redisscript

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/redis/go-redis/v9"
)

// scriptDir is the folder of a package's embedded scripts, one
// self-contained file each: `//go:embed lua/*.lua`.
const scriptDir = "lua"

// MustLoad is the script lua/<name>.lua of fsys, a package's embedded
// scripts. It panics when the file is not there, like regexp.MustCompile:
// the names are the package's own constants, so any test of the package
// catches a wrong one when the package initialises.
func MustLoad(fsys fs.FS, name string) *redis.Script {
	text, err := fs.ReadFile(fsys, path.Join(scriptDir, name+".lua"))
	if err != nil {
		panic(fmt.Sprintf("redisscript: script %s: %v", name, err))
	}
	return redis.NewScript(string(text))
}

// Texts are all the scripts of fsys's lua/ folder by name (the file name
// without .lua), for the tests that hold each script to its argument
// struct ([CheckHeader]).
func Texts(fsys fs.FS) (map[string]string, error) {
	files, err := fs.Glob(fsys, path.Join(scriptDir, "*.lua"))
	if err != nil {
		return nil, err
	}
	texts := make(map[string]string, len(files))
	for _, f := range files {
		text, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		texts[strings.TrimSuffix(path.Base(f), ".lua")] = string(text)
	}
	return texts, nil
}
