// Command benchplot draws a gatewaybench sweep (the sweep.json that
// gatewaybench -out writes) as an SVG plot of p99 latency against
// concurrency: one panel per mode and API, one line per gateway profile
// and one for its reference (the exactly-once floor over REST, the plain
// go-sdk server over MCP).
//
//	benchplot -in out/sweep.json -out out/p99.svg
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/toolgateway/toolgateway/internal/benchtool"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("benchplot", flag.ContinueOnError)
	fs.SetOutput(out)
	in := fs.String("in", "", "the sweep.json gatewaybench -out wrote")
	svg := fs.String("out", "", "the SVG file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *svg == "" || fs.NArg() > 0 {
		return errors.New("usage: benchplot -in sweep.json -out p99.svg")
	}
	raw, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	var sweep benchtool.Sweep
	if err := json.Unmarshal(raw, &sweep); err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	var b bytes.Buffer
	if err := sweep.WriteP99SVG(&b); err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if err := os.WriteFile(*svg, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s\n", *svg)
	return nil
}
