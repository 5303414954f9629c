package verify

import (
	"encoding/xml"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText writes one aligned line per result: verdict, tool, guarantee,
// detail.
func WriteText(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Verdict, r.Tool, r.Guarantee, r.Detail)
	}
	return tw.Flush()
}

// junitSuite is the JUnit XML CI systems read: one testcase per guarantee
// per tool, N/A as skipped.
type junitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	ClassName string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes the results as a JUnit XML test suite, the tool as
// each case's class: a FAIL is a failure, an N/A skipped.
func WriteJUnit(w io.Writer, results []Result) error {
	suite := junitSuite{Name: "gateway verify", Tests: len(results)}
	for _, r := range results {
		c := junitCase{ClassName: r.Tool, Name: r.Guarantee}
		switch r.Verdict {
		case Fail:
			c.Failure = &junitMessage{Message: r.Detail}
			suite.Failures++
		case NA:
			c.Skipped = &junitMessage{Message: r.Detail}
			suite.Skipped++
		}
		suite.Cases = append(suite.Cases, c)
	}
	out, err := xml.MarshalIndent(suite, "", "  ")
	if err != nil {
		return fmt.Errorf("verify: junit: %w", err)
	}
	if _, err := w.Write(append([]byte(xml.Header), append(out, '\n')...)); err != nil {
		return fmt.Errorf("verify: junit: %w", err)
	}
	return nil
}
