package redisscript

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
)

// scriptDir is the folder of a package's embedded scripts, one file
// each: `//go:embed lua/*.lua lua/include/*.lua`.
const scriptDir = "lua"

// includeDir holds the pieces several scripts share (a helper function
// written once), each taken in by a line `--#include <name>` that stands
// for lua/include/<name>.lua. Redis runs one text per script, so the
// pieces are put in before the script is hashed and sent.
const includeDir = "include"

// includeLine is one `--#include <name>` line.
var includeLine = regexp.MustCompile(`(?m)^--#include (\w+)\n`)

// expand puts the included pieces into a script's text.
func expand(fsys fs.FS, text string) (string, error) {
	var err error
	out := includeLine.ReplaceAllStringFunc(text, func(line string) string {
		name := includeLine.FindStringSubmatch(line)[1]
		piece, rerr := fs.ReadFile(fsys, path.Join(scriptDir, includeDir, name+".lua"))
		if rerr != nil {
			err = fmt.Errorf("include %s: %w", name, rerr)
			return line
		}
		return string(piece)
	})
	return out, err
}

// MustLoad is the script lua/<name>.lua of fsys, a package's embedded
// scripts, with its `--#include` lines put in. It panics when the file is not there, like regexp.MustCompile:
// the names are the package's own constants, so any test of the package
// catches a wrong one when the package initialises.
func MustLoad(fsys fs.FS, name string) *redis.Script {
	text, err := fs.ReadFile(fsys, path.Join(scriptDir, name+".lua"))
	if err != nil {
		panic(fmt.Sprintf("redisscript: script %s: %v", name, err))
	}
	script, err := expand(fsys, string(text))
	if err != nil {
		panic(fmt.Sprintf("redisscript: script %s: %v", name, err))
	}
	return redis.NewScript(script)
}

// Texts are all the scripts of fsys's lua/ folder by name (the file name
// without .lua), their includes put in, for the tests that hold each script to its argument
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
		script, err := expand(fsys, string(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		texts[strings.TrimSuffix(path.Base(f), ".lua")] = script
	}
	return texts, nil
}
